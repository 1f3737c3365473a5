#!/usr/bin/env python3
"""torch matmul throughput, the twin of bench/bench_matmul.cpp: same sizes, same JSON fields.

f32 with TF32 off (cuBLAS SGEMM, the fair peer of our scalar tier) and f16 (tensor cores, the peer of the
cooperative tiers). Timed with CUDA events around each call, after warm-up; median of the runs.
    python3 scripts/device/matmul_torch.py [--sizes 1024,4096,8192] [--iters 10] [--layouts nn]
"""
import argparse
import json

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,4096,8192")
    ap.add_argument("--dtypes", default="f32,f16")
    ap.add_argument("--layouts", default="nn")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    for dtype_name in args.dtypes.split(","):
        dtype = {"f32": torch.float32, "f16": torch.float16}[dtype_name]
        for layout in args.layouts.split(","):
            for n in (int(s) for s in args.sizes.split(",")):
                a = torch.rand(n, n, device=dev, dtype=dtype, generator=gen) * 2 - 1
                b = torch.rand(n, n, device=dev, dtype=dtype, generator=gen) * 2 - 1
                # Layout: 't' means the stored matrix is the transpose, read through a transposed view.
                a_op = a.t() if layout[0] == "t" else a
                b_op = b.t() if layout[1] == "t" else b
                for _ in range(args.warmup):
                    torch.mm(a_op, b_op)
                torch.cuda.synchronize()
                times = []
                for _ in range(args.iters):
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    torch.mm(a_op, b_op)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))
                times.sort()
                median, best = times[len(times) // 2], times[0]
                flop = 2.0 * n * n * n
                print(json.dumps({"bench": "torch_matmul", "device": name, "dtype": dtype_name, "layout": layout,
                                  "m": n, "n": n, "k": n, "iters": args.iters, "median_ms": round(median, 4),
                                  "best_ms": round(best, 4), "tflops_median": round(flop / (median * 1e9), 2),
                                  "tflops_best": round(flop / (best * 1e9), 2),
                                  "tf32": torch.backends.cuda.matmul.allow_tf32}), flush=True)
                del a, b
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
