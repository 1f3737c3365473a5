#!/usr/bin/env python3
"""torch matmul throughput, the twin of bench/bench_matmul.cpp: same sizes, same JSON fields.

f32 with TF32 off (cuBLAS SGEMM, the fair peer of our scalar tier) and f16 (tensor cores, the peer of the
cooperative tiers). Timed with CUDA events around each call, after warm-up; median of the runs.
    python3 scripts/device/matmul_torch.py [--sizes 1024,4096,8192] [--iters 10] [--layouts nn]
    python3 scripts/device/matmul_torch.py --shapes smollm2      SmolLM2-135M's products (bench_matmul's list)
    python3 scripts/device/matmul_torch.py --shapes 128x576x576:nn,1x576x576:nt
"""
import argparse
import json

import torch


def smollm2_shapes():
    """bench_matmul's smollm2_shapes(), in the same order: GEMV at M = 1, 4, 8; M = 128, 512, 2048 forward (nn),
    input gradient (nt) and weight gradient (tn, K = tokens); the tied 49152-wide head and its gradients."""
    out = []
    nk = [(576, 576), (192, 576), (1536, 576), (576, 1536)]
    for m in (1, 4, 8):
        for n, k in nk:
            out += [(m, n, k, "nn"), (m, n, k, "nt")]
        out.append((m, 49152, 576, "nt"))
    for m in (128, 512, 2048):
        for n, k in nk:
            out += [(m, n, k, "nn"), (m, k, n, "nt"), (k, n, m, "tn")]
        out += [(m, 49152, 576, "nt"), (m, 576, 49152, "nn"), (49152, 576, m, "tn")]
    return out


def parse_shapes(text, layouts):
    out = []
    for item in text.split(","):
        if item == "smollm2":
            out += smollm2_shapes()
            continue
        dims, _, layout = item.partition(":")
        m, n, k = (int(x) for x in dims.split("x"))
        out += [(m, n, k, layout)] if layout else [(m, n, k, lay) for lay in layouts]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,4096,8192")
    ap.add_argument("--dtypes", default="f32,f16")
    ap.add_argument("--layouts", default="nn")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--shapes", default="", help="smollm2 or MxNxK[:layout],... instead of --sizes cubes")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    for dtype_name in args.dtypes.split(","):
        dtype = {"f32": torch.float32, "f16": torch.float16}[dtype_name]
        shapes = (parse_shapes(args.shapes, args.layouts.split(",")) if args.shapes else
                  [(n, n, n, lay) for lay in args.layouts.split(",") for n in (int(x) for x in args.sizes.split(","))])
        for m, n, k, layout in shapes:
            # Stored shapes: A is K x M when transposed, B is N x K; 't' reads the stored matrix through a
            # transposed view.
            a = torch.rand(*((k, m) if layout[0] == "t" else (m, k)), device=dev, dtype=dtype, generator=gen) * 2 - 1
            b = torch.rand(*((n, k) if layout[1] == "t" else (k, n)), device=dev, dtype=dtype, generator=gen) * 2 - 1
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
            flop = 2.0 * m * n * k
            print(json.dumps({"bench": "torch_matmul", "device": name, "dtype": dtype_name, "layout": layout,
                              "m": m, "n": n, "k": k, "iters": args.iters, "median_ms": round(median, 4),
                              "best_ms": round(best, 4), "tflops_median": round(flop / (median * 1e9), 2),
                              "tflops_best": round(flop / (best * 1e9), 2),
                              "tf32": torch.backends.cuda.matmul.allow_tf32}), flush=True)
            del a, b
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
