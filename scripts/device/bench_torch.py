#!/usr/bin/env python3
"""torch side of bench_step (issue 7), JSON lines with the same fields as bench/bench_step.cpp:
  * the README MLP step (784-128-10, batch 32, no biases, one-hot cross-entropy; SGD lr 0.1, Adam lr 1e-3):
    wall time per step in eager mode and replaying a CUDA graph (mean of --steps, synchronised once at the end,
    so launches overlap the GPU), and GPU time per step (CUDA events around each step, median);
  * out = x*1.5 + y (torch.add(y, x, alpha=1.5, out=o), one fused kernel) and copy_ over the same sizes: GPU
    time with CUDA events, bandwidth counting every byte read and written.
    python3 scripts/device/bench_torch.py [--steps 2000] [--mib 256,1024]
"""
import argparse
import json
import time

import torch


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def timed_events(fn, n):
    out = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out


def mlp(kind, steps, dev):
    torch.manual_seed(0)
    x = torch.rand(32, 784, device=dev) * 2 - 1
    y = torch.nn.functional.one_hot(torch.randint(0, 10, (32,), device=dev), 10).float()

    def make(capturable=False):
        m = torch.nn.Sequential(torch.nn.Linear(784, 128, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10, bias=False)).to(dev)
        opt = (torch.optim.SGD(m.parameters(), lr=0.1) if kind == "sgd"
               else torch.optim.Adam(m.parameters(), lr=1e-3, capturable=capturable))
        return m, opt

    def step(m, opt):
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    m, opt = make()
    for _ in range(100):
        step(m, opt)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step(m, opt)
    torch.cuda.synchronize()
    eager_wall = (time.perf_counter() - t) / steps * 1e3
    eager_gpu = median(timed_events(lambda: step(m, opt), 200))

    m, opt = make(capturable=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(5):
            step(m, opt)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(m, opt)
    for _ in range(100):
        g.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        g.replay()
    torch.cuda.synchronize()
    graph_wall = (time.perf_counter() - t) / steps * 1e3
    graph_gpu = median(timed_events(g.replay, 200))
    # One synchronised replay per step, like our run() (submit + fence wait).
    t = time.perf_counter()
    for _ in range(steps // 4):
        g.replay()
        torch.cuda.synchronize()
    graph_sync = (time.perf_counter() - t) / (steps // 4) * 1e3
    print(json.dumps({"bench": "torch_mlp_step", "optimizer": kind, "steps": steps, "eager_wall_ms": eager_wall,
                      "eager_gpu_ms": eager_gpu, "graph_wall_ms": graph_wall, "graph_gpu_ms": graph_gpu,
                      "graph_sync_wall_ms": graph_sync}), flush=True)


def pointwise(mib, dev):
    n = (mib << 20) // 4
    x = torch.full((n,), 0.5, device=dev)
    y = torch.full((n,), 0.5, device=dev)
    o = torch.empty_like(x)
    for name, fn, nbytes in (("torch_pointwise", lambda: torch.add(y, x, alpha=1.5, out=o), 12 * n),
                             ("torch_copy", lambda: o.copy_(x), 8 * n)):
        for _ in range(5):
            fn()
        t = median(timed_events(fn, 30))
        print(json.dumps({"bench": name, "mib": mib, "gpu_ms_median": t, "gbps_median": nbytes / (t * 1e-3) / 1e9}),
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--mib", default="256,1024")
    a = ap.parse_args()
    dev = torch.device("cuda")
    for kind in ("sgd", "adam"):
        mlp(kind, a.steps, dev)
    for mib in (int(v) for v in a.mib.split(",")):
        pointwise(mib, dev)


if __name__ == "__main__":
    main()
