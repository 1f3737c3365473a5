O=${OUT:-/tmp/out}; mkdir -p $O
timeout 150 bin/meganeura_tests_gpu --gtest_filter='CoopMatRewrite*:SessionMatmul*:MatmulSplit*' > $O/tests.txt 2>&1; echo tests rc $?; grep -E "^\[  (FAILED|PASSED) |variant|Failure" $O/tests.txt | tail -20
timeout 150 bin/bench_step --mib 4 > $O/step.jsonl 2>&1; echo rc $?
cut -c1-330 $O/step.jsonl
