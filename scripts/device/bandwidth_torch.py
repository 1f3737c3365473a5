#!/usr/bin/env python3
"""torch copy_ bandwidth on the GPU, the twin of bench/bench_bandwidth.cpp: same sizes, same JSON fields.

Bytes moved count the read and the write. Timed with CUDA events around each copy_, after warm-up.
    python3 scripts/device/bandwidth_torch.py [--mib 64,128,256,512,1024] [--iters 20]
"""
import argparse
import json

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", default="64,128,256,512,1024")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    for mib in (int(m) for m in args.mib.split(",")):
        nbytes = mib << 20
        src = torch.zeros(nbytes // 4, dtype=torch.float32, device=dev)
        dst = torch.empty_like(src)
        for _ in range(args.warmup):
            dst.copy_(src)
        torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        median, best = times[len(times) // 2], times[0]
        moved = 2.0 * nbytes
        print(json.dumps({"bench": "torch_copy_", "device": name, "bytes": nbytes, "iters": args.iters,
                          "median_ms": round(median, 4), "best_ms": round(best, 4),
                          "gbps_median": round(moved / (median * 1e6), 1),
                          "gbps_best": round(moved / (best * 1e6), 1)}), flush=True)
        del src, dst
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
