#!/usr/bin/env python3
"""The PyTorch twin of bench_onnx: the same ONNX file converted by onnx2torch, timed on CUDA (eager, fp32
with TF32 off as our f32 path computes, and PyTorch's default where cuDNN may use TF32 for convolutions).
One JSON line per batch x mode, the fields of bench_onnx: wall_ms (forward + synchronize, mean of --steps
after --warmup), gpu_ms (CUDA events around one forward, median of --gpu-steps), output0_sum (same input
formula as bench_onnx: x[i] = (i * 7919 mod 1024) / 1024).

usage: onnx_torch.py MODEL.onnx --chw 3,640,640 --batches 1,32 [--steps 20] [--warmup 5] [--gpu-steps 20]
       [--modes fp32,default] [--device cuda|cpu]

onnx2torch reads Conv weights only from initializers; exporters such as paddle2onnx (PP-OCR) write them as
Constant nodes, so Constant nodes holding a tensor become initializers first (the same values, the same graph).
"""
import argparse
import json
import statistics
import time

import onnx
import onnx2torch
import torch


def constants_to_initializers(model):
    g = model.graph
    keep = []
    for n in g.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            g.initializer.append(t)
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--chw", default="3,640,640")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--modes", default="fp32,default")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gpu-steps", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    chw = [int(v) for v in a.chw.split(",")]
    dev = torch.device(a.device)
    net = onnx2torch.convert(constants_to_initializers(onnx.load(a.model))).to(dev).eval()
    cuda = dev.type == "cuda"
    for mode in a.modes.split(","):
        if cuda:
            torch.backends.cudnn.allow_tf32 = mode == "default"
            torch.backends.cuda.matmul.allow_tf32 = False
        for batch in [int(v) for v in a.batches.split(",")]:
            n = batch * chw[0] * chw[1] * chw[2]
            x = ((torch.arange(n, dtype=torch.int64) * 7919 % 1024).float() / 1024).reshape(batch, *chw).to(dev)
            sync = torch.cuda.synchronize if cuda else (lambda: None)
            with torch.inference_mode():
                for _ in range(a.warmup):
                    net(x)
                sync()
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    y = net(x)
                sync()
                wall_ms = (time.perf_counter() - t0) * 1e3 / a.steps
                gpu = []
                if cuda:
                    for _ in range(a.gpu_steps):
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        y = net(x)
                        e.record()
                        e.synchronize()
                        gpu.append(s.elapsed_time(e))
            y0 = y[0] if isinstance(y, (list, tuple)) else y
            line = dict(
                bench="torch_onnx2torch",
                model=a.model.rsplit("/", 1)[-1],
                device=torch.cuda.get_device_name() if cuda else "cpu",
                torch=torch.__version__,
                batch=batch,
                chw=chw,
                mode=mode,
                wall_ms=wall_ms,
                gpu_ms=statistics.median(gpu) if gpu else None,
                output0_sum=float(y0.double().sum()),
            )
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
