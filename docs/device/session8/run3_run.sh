O=${OUT:-/tmp/out}; mkdir -p $O
B="bin/bench_coopmat2 --sizes 8192 --warmup 150 --reps 20"
timeout 80 $B --stages 1 --variants staged,stagedl1 --tiles 128x128x32,128x128x64,128x128x16 --wg 128 > $O/s1_wg128.jsonl 2>$O/s1_wg128.err; echo rc $?
timeout 40 $B --stages 1 --variants staged,stagedl1 --tiles 128x256x32,128x256x16 --wg 256 > $O/s1_wg256.jsonl 2>$O/s1_wg256.err; echo rc $?
timeout 60 $B --stages 2 --variants staged,stagedl1 --tiles 128x128x32,128x128x16 --wg 128 > $O/s2_wg128.jsonl 2>$O/s2_wg128.err; echo rc $?
timeout 40 $B --stages 2 --variants staged,stagedl1 --tiles 128x256x16 --wg 256 > $O/s2_wg256.jsonl 2>$O/s2_wg256.err; echo rc $?
for f in $O/s*.jsonl; do grep -v caps $f | sed 's/.*"variant"/"variant"/' ; done
