O=${OUT:-/tmp/out}; mkdir -p $O
timeout 200 bin/bench_step --tune --mib 4 > $O/step_tune.jsonl 2> $O/step_tune_report.txt; echo rc $?
cat $O/step_tune.jsonl | cut -c1-400; cat $O/step_tune_report.txt | head -80
