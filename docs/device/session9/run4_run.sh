O=${OUT:-/tmp/out}; mkdir -p $O
B="timeout 120 bin/bench_coopmat2 --sizes 8192 --wg 128 --warmup 150 --reps 20"
$B --variants staged --tiles 128x128x32 --stages 1 > $O/s1.jsonl 2>&1
$B --variants ws2x4p4,ws2x4p4d2,ws2x4p4d3,ws4x2p4d2,ws4x2p4d3,ws2x2p4d2,ws2x2p4d3,ws2x2p2d2 --tiles 128x128x32 --stages 2 > $O/ws32.jsonl 2>&1; echo rc $?
$B --variants ws2x4p4d2,ws2x4p4d4,ws4x2p4d4,ws2x2p4d4 --tiles 128x128x16 --stages 2 > $O/ws16.jsonl 2>&1; echo rc $?
$B --variants ws2x4p4d2,ws4x2p4d3 --tiles 128x128x16 --stages 3 > $O/ws16s3.jsonl 2>&1; echo rc $?
for f in s1 ws32 ws16 ws16s3; do grep -hv caps $O/$f.jsonl | sed 's/.*"variant"/"variant"/; s/"pad":1,//; s/"median_ms":[0-9.]*,//'; done
