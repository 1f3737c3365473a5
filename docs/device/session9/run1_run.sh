O=${OUT:-/tmp/out}; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 240 bin/meganeura_tests_gpu --gtest_filter='MatmulTiers.WorkgroupScope*:SessionMatmul.Mixed16Large*:CoopMatRewrite*:TensorLoads*' > $O/tests.txt 2>&1; echo tests rc $?; grep -E "^\[  (FAILED|PASSED) |^\[       OK|variant|Failure" $O/tests.txt | tail -40
timeout 100 bin/bench_coopmat2 --sizes 8192 --wg 128 --tiles 128x128x32,128x128x16,128x128x64 --variants stagedmf,stagedmfl1 --stages 2 > $O/cm2_mf128.jsonl 2>&1; echo cm2 rc $?
timeout 60 bin/bench_coopmat2 --sizes 8192 --wg 256 --tiles 128x256x32,256x128x32,128x256x16 --variants stagedmf --stages 2 > $O/cm2_mf256.jsonl 2>&1; echo cm2 rc $?
timeout 40 bin/bench_coopmat2 --sizes 8192 --wg 128 --tiles 128x128x32 --variants staged --stages 1 > $O/cm2_s1.jsonl 2>&1; echo cm2 rc $?
grep -hv caps $O/cm2_*.jsonl | sed 's/.*"variant"/"variant"/'
timeout 100 bin/bench_matmul --no-probe --sizes 8192 --tiers coopmat-khr --layouts nn,tn,nt --iters 20 --warmup 150 --tiles 128x128x32/2x2/s1/w,128x128x32/2x2/w > $O/mm8192.jsonl 2>&1; echo mm rc $?
timeout 100 bin/bench_matmul --no-probe --sizes 4096 --tiers coopmat-khr --layouts nn,tn,nt --iters 20 --warmup 800 --tiles 128x128x32/2x2/s1/w,128x128x32/2x2/w,128x256x32/4x4/g4/s1 > $O/mm4096.jsonl 2>&1; echo mm rc $?
timeout 100 bin/bench_matmul --no-probe --sizes 8192 --tiers coopmat-khr --mixed16 --layouts nn,nt --iters 20 --warmup 150 --tiles 128x128x32/2x2/s1/w,128x128x32/2x2/w,128x256x32/4x4/g4/s1 > $O/mm_mixed.jsonl 2>&1; echo mm rc $?
grep -o '"layout":"[a-z]*","m":[0-9]*\|"variant":"[^"]*"\|"Register Count":[0-9]*\|"tflops_median":[0-9.]*\|"check[^,]*' $O/mm*.jsonl | paste - - - - - -
timeout 90 python3 scripts/matmul_torch.py --sizes 8192,4096 --dtypes f16 --layouts nn,tn,nt --iters 20 --warmup 10 > $O/torch.jsonl 2>&1; echo torch rc $?
cat $O/torch.jsonl
