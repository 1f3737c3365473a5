O=${OUT:-/tmp/out}; mkdir -p $O
bin/meganeura info | grep -i "f16 conv"
timeout 150 bin/meganeura_tests_gpu --gtest_filter='MatmulTiers.Mixed16*:CoopMatRewrite.Mixed16*:MatmulTiers.CooperativeTiers*:SessionMatmul.Mixed16*:MatmulSplit.BatchedAndMixed16' > $O/tests.txt 2>&1; echo tests rc $?; grep -E "^\[  (FAILED|PASSED) |rounding|skipped|Failure" $O/tests.txt | tail -20
for f in "" --no-rte; do timeout 100 bin/bench_matmul --no-probe --mixed16 $f --sizes 8192,4096,1024 --tiers coopmat-khr,coopmat-nv --layouts nn,nt --iters 20 --warmup 300 > $O/mm${f#--}.jsonl 2>&1; echo mm rc $?; done
grep -ho '"tier":"[a-z-]*"\|"layout":"[a-z]*","m":[0-9]*\|"rte_f16":[a-z]*\|"tflops_median":[0-9.]*\|"correct":[a-z]*' $O/mm*.jsonl | paste - - - - -
