O=${OUT:-/tmp/out}; mkdir -p $O
B="bin/bench_coopmat2 --sizes 8192 --warmup 150 --reps 20 --stages 1 --variants staged,stagedl1"
timeout 60 $B --tiles 128x64x32,64x128x32,64x128x64,128x128x32 --wg 128 > $O/w128.jsonl 2>$O/w128.err; echo rc $?
timeout 60 $B --tiles 64x64x32,64x128x32,128x64x32 --wg 64 > $O/w64.jsonl 2>$O/w64.err; echo rc $?
for f in $O/*.jsonl; do grep -v caps $f | sed 's/.*"variant"/"variant"/' ; done
