O=${OUT:-/tmp/out}; mkdir -p $O
timeout 150 bin/bench_matmul --no-probe --mixed16 --sizes 128,256,384,512,768,1024,2048 --tiers scalar,coopmat-khr --layouts nn,nt,tn --iters 50 --warmup 3000 > $O/mixed_small.jsonl 2>&1; echo rc $?
grep -o '"tier":"[a-z-]*"\|"layout":"[a-z]*","m":[0-9]*\|"variant":"[^"]*"\|"median_ms":[0-9.]*\|"correct":[a-z]*' $O/mixed_small.jsonl | paste - - - - - 
timeout 150 bin/bench_matmul --tune --mixed16 --sizes 256,512,1024 --layouts nn > $O/mixed_tune.jsonl 2> $O/mixed_tune_report.txt; echo rc $?
cat $O/mixed_tune.jsonl | cut -c1-400
