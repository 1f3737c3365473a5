O=${OUT:-/tmp/out}; mkdir -p $O
B="timeout 120 bin/bench_coopmat2 --sizes 8192 --warmup 150 --reps 20 --stages 1"
$B --wg 128 --variants staged,stagedpf1,stagedpf2,stagedpf3,stagedl1 --tiles 128x128x32,128x128x16 > $O/pf128.jsonl 2>&1; echo rc $?
$B --wg 256 --variants staged,stagedpf1,stagedpf2 --tiles 128x256x32 > $O/pf256.jsonl 2>&1; echo rc $?
for f in pf128 pf256; do grep -hv caps $O/$f.jsonl | sed 's/.*"variant"/"variant"/; s/"pad":1,//; s/"median_ms":[0-9.]*,//'; done
