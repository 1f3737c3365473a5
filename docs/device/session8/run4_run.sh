O=${OUT:-/tmp/out}; mkdir -p $O
B="bin/bench_coopmat2 --sizes 8192 --warmup 150 --reps 20 --stages 1"
timeout 60 $B --variants tensorc,tensor2c --tiles 128x128x32 --wg 128 > $O/tc128.jsonl 2>$O/tc128.err; echo rc $?
timeout 60 $B --variants tensorc,tensor2c --tiles 128x256x32,128x128x32 --wg 256 > $O/tc256.jsonl 2>$O/tc256.err; echo rc $?
timeout 30 $B --variants staged --tiles 128x128x32 --wg 128 --pad 0 > $O/pad0.jsonl 2>$O/pad0.err; echo rc $?
timeout 30 $B --variants staged --tiles 128x128x32 --wg 128 --pad 2 > $O/pad2.jsonl 2>$O/pad2.err; echo rc $?
for f in $O/*.jsonl; do grep -v caps $f | sed 's/.*"variant"/"variant"/' ; done
