O=${OUT:-/tmp/out}; mkdir -p $O
timeout 150 bin/meganeura_tests_gpu --gtest_filter='CoopMatRewrite*:SessionMatmul.Mixed16Large*:MatmulTiers.WorkgroupScope*' > $O/tests.txt 2>&1; echo tests rc $?; grep -E "^\[  (FAILED|PASSED) |variant|Failure" $O/tests.txt | tail -20
timeout 60 bin/bench_coopmat2 --sizes 8192 --wg 128 --tiles 128x128x32 --variants staged,stagedl2,stagedl1 --stages 1 > $O/cm2_l2.jsonl 2>&1; echo cm2 rc $?
grep -hv caps $O/cm2_l2.jsonl | sed 's/.*"variant"/"variant"/'
timeout 60 bin/bench_matmul --no-probe --sizes 8192 --tiers coopmat-khr --mixed16 --layouts nn,nt --iters 20 --warmup 150 > $O/mm_mixed_default.jsonl 2>&1; echo mm rc $?
grep -o '"layout":"[a-z]*","m":[0-9]*\|"variant":"[^"]*"\|"tflops_median":[0-9.]*' $O/mm_mixed_default.jsonl | paste - - -
OUT=$O/all timeout 380 bash scripts/bench_all.sh > $O/all_log.txt 2>&1; echo all rc $?
cat $O/all/table.md
