O=${OUT:-/tmp/out}; mkdir -p $O
B="timeout 120 bin/bench_coopmat2 --sizes 8192 --wg 128 --warmup 150 --reps 20"
$B --variants staged --tiles 128x128x32 --stages 1 > $O/s1.jsonl 2>&1
$B --variants ws2x2p4,ws2x4p4,ws4x2p4,ws2x2p2 --tiles 128x128x32,128x128x16 --stages 2 > $O/ws_s2.jsonl 2>&1; echo rc $?
$B --variants ws2x4p4,ws4x2p4,ws4x4p4 --tiles 128x256x32,256x128x32 --stages 2 > $O/ws_s2big.jsonl 2>&1; echo rc $?
$B --variants ws2x2p4,ws2x4p4,ws4x2p4 --tiles 128x128x16 --stages 3 > $O/ws_s3.jsonl 2>&1; echo rc $?
$B --variants ws2x2p4,ws2x4p4,ws4x2p4 --tiles 128x128x16 --stages 4 > $O/ws_s4.jsonl 2>&1; echo rc $?
for f in s1 ws_s2 ws_s2big ws_s3 ws_s4; do grep -hv caps $O/$f.jsonl | sed 's/.*"variant"/"variant"/; s/"pad":1,//; s/"median_ms":[0-9.]*,//'; done
