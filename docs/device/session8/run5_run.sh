O=${OUT:-/tmp/out}; mkdir -p $O
B="bin/bench_coopmat2 --sizes 8192 --warmup 150 --reps 20 --stages 1"
timeout 60 $B --variants tensorc,tensorwc --tiles 128x128x32,128x128x64,128x128x16 --wg 128 > $O/a128.jsonl 2>$O/a128.err; echo rc $?
timeout 60 $B --variants tensor2c,tensor2wc --tiles 128x128x32,128x128x64,128x128x16 --wg 128 > $O/b128.jsonl 2>$O/b128.err; echo rc $?
timeout 60 $B --variants tensorc,tensorwc --tiles 128x256x32,128x256x64,256x128x32 --wg 256 > $O/a256.jsonl 2>$O/a256.err; echo rc $?
timeout 60 $B --variants tensor2c,tensor2wc --tiles 128x256x32,128x256x64,256x128x32 --wg 256 > $O/b256.jsonl 2>$O/b256.err; echo rc $?
for f in $O/*.jsonl; do grep -v caps $f | sed 's/.*"variant"/"variant"/' ; done
