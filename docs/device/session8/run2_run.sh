O=${OUT:-/tmp/out}; mkdir -p $O
timeout 60 bin/meganeura_tests_gpu --gtest_filter='TensorLoads*:CoopMatRewrite*' > $O/tests.txt 2>&1; echo tests rc $?; tail -3 $O/tests.txt
B="bin/bench_coopmat2 --sizes 8192 --stages 1 --warmup 150 --reps 20"
timeout 70 $B --variants staged,stagedl1 --tiles 128x128x32,128x256x32 --wg 128,256 > $O/cm2_staged.jsonl 2>$O/cm2_staged.err; echo staged rc $?
timeout 70 $B --variants tensorw --tiles 128x128x32,128x256x32 --wg 256 > $O/cm2_tw256.jsonl 2>$O/cm2_tw256.err; echo tw256 rc $?
timeout 50 $B --variants tensorw,tensor2w --tiles 128x128x32 --wg 128 > $O/cm2_tw128.jsonl 2>$O/cm2_tw128.err; echo tw128 rc $?
timeout 50 $B --variants tensor2w --tiles 128x256x32 --wg 256 > $O/cm2_t2w256.jsonl 2>$O/cm2_t2w256.err; echo t2w256 rc $?
for f in $O/cm2_*.jsonl; do grep -v caps $f | sed 's/.*"variant"/"variant"/' ; done
