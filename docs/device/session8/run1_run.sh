set -x
O=${OUT:-/tmp/out}; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/smi.txt 2>&1
timeout 60 bin/meganeura_tests_gpu --gtest_filter='MatmulTiers.WorkgroupScope*:MatmulTiers.SelfTest*:CoopMatRewrite*:TensorLoads*' > $O/tests.txt 2>&1; echo tests rc $?
tail -5 $O/tests.txt
timeout 150 bin/bench_coopmat2 --sizes 8192 --variants tensor,tensor2,stagedt,staged --tiles 128x128x32,128x128x64,128x256x32,128x256x64,256x128x64 --wg 256 --stages 1 --warmup 150 --reps 20 > $O/cm2_wg256.jsonl 2>$O/cm2_wg256.err; echo cm2 256 rc $?
cat $O/cm2_wg256.jsonl | cut -c1-400
timeout 120 bin/bench_coopmat2 --sizes 8192 --variants tensor,tensor2,stagedt,staged --tiles 128x128x32,128x128x64,128x256x32 --wg 128 --stages 1 --warmup 150 --reps 20 > $O/cm2_wg128.jsonl 2>$O/cm2_wg128.err; echo cm2 128 rc $?
cat $O/cm2_wg128.jsonl | cut -c1-400
timeout 100 bin/bench_matmul --no-probe --sizes 8192 --tiers coopmat-khr --layouts nn,tn,nt --iters 20 --warmup 150 --tiles 128x256x32/4x4/g4/s1,128x128x32/2x2/s1/w,128x128x64/2x2/s1/w,128x256x32/2x4/s1/w > $O/matmul.jsonl 2>$O/matmul.err; echo matmul rc $?
cut -c1-300 $O/matmul.jsonl
timeout 90 python3 scripts/matmul_torch.py --sizes 8192 --dtypes f16 --layouts nn,tn,nt --iters 20 --warmup 10 > $O/torch.jsonl 2>&1; echo torch rc $?
cat $O/torch.jsonl
