O=${OUT:-/tmp/out}; mkdir -p $O
timeout 50 bin/meganeura_tests_gpu --gtest_filter='MatmulTiers.WorkgroupScope*' > $O/tests.txt 2>&1; echo tests rc $?; grep -E "OK|FAIL|PASSED" $O/tests.txt
timeout 60 bin/bench_matmul --no-probe --sizes 8192 --tiers coopmat-khr --layouts nn,tn,nt --iters 20 --warmup 150 --tiles 128x128x32/2x2/s1/w,128x256x32/4x4/g4/s1 > $O/mm.jsonl 2>&1; echo mm rc $?
grep -o '"layout":"[a-z]*"\|"variant":"[^"]*"\|"Register Count":[0-9]*\|"tflops_median":[0-9.]*\|"check[^,]*' $O/mm.jsonl | paste - - - - -
