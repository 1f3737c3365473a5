O=${OUT:-/tmp/out}; mkdir -p $O
timeout 120 bin/meganeura_tests_gpu --gtest_filter='TensorLoads*:SessionMatmul.Mixed16Large*' > $O/tests_new.txt 2>&1; echo new tests rc $?; grep -E "variant|PASSED|FAILED" $O/tests_new.txt
timeout 60 bin/bench_matmul --no-probe --sizes 8192,4096 --tiers coopmat-khr --layouts nt --iters 20 --warmup 300 > $O/nt_default.jsonl 2>&1; echo nt rc $?
timeout 60 bin/bench_matmul --no-probe --sizes 8192,4096 --tiers coopmat-khr --layouts nt --iters 20 --warmup 300 --tiles 128x256x32/4x4/g4/s1 > $O/nt_old.jsonl 2>&1; echo ntold rc $?
grep -o '"layout":"[a-z]*","m":[0-9]*\|"variant":"[^"]*"\|"tflops_median":[0-9.]*' $O/nt_*.jsonl | paste - - - 
timeout 40 bin/bench_coopmat2 --sizes 8192 --variants tensor,staged --tiles 128x128x32 --wg 128 --stages 1 > $O/cm2.jsonl 2>&1; echo cm2 rc $?; grep -v caps $O/cm2.jsonl | sed 's/.*"variant"/"variant"/'
OUT=$O/all timeout 330 bash scripts/bench_all.sh > $O/all_log.txt 2>&1; echo all rc $?
cat $O/all/table.md
