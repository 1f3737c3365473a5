#!/usr/bin/env python3
"""PyTorch side of the MLP comparison (issue 7): the README MLP 784-128-10, batch 32, cross-entropy with one-hot
targets, on Fashion-MNIST read from IDX files. Prints JSON lines: per-step wall time for SGD and Adam in eager
mode and under a CUDA graph, and the wall time of one 1875-step epoch in eager mode (host batches copied each
step, as a data loader would)."""
import gzip, json, struct, sys, time
import numpy as np
import torch

def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)

d = sys.argv[1] if len(sys.argv) > 1 else "fashion-mnist"
x = torch.tensor(idx(f"{d}/train-images-idx3-ubyte.gz").reshape(-1, 784), dtype=torch.float32) / 255.0
y = torch.nn.functional.one_hot(torch.tensor(idx(f"{d}/train-labels-idx1-ubyte.gz"), dtype=torch.long), 10).float()
dev = torch.device("cuda")
torch.manual_seed(0)

def model_and_opt(kind):
    m = torch.nn.Sequential(torch.nn.Linear(784, 128, bias=False), torch.nn.ReLU(), torch.nn.Linear(128, 10, bias=False)).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.1) if kind == "sgd" else torch.optim.Adam(m.parameters(), lr=1e-3)
    return m, opt

def step(m, opt, xb, yb):
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.cross_entropy(m(xb), yb)
    loss.backward()
    opt.step()
    return loss

xb, yb = x[:32].to(dev), y[:32].to(dev)
for kind in ("sgd", "adam"):
    m, opt = model_and_opt(kind)
    for _ in range(50):
        step(m, opt, xb, yb)
    torch.cuda.synchronize()
    n = 1000
    t = time.perf_counter()
    for _ in range(n):
        step(m, opt, xb, yb)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t) / n
    # the same step captured in a CUDA graph
    m, opt = model_and_opt(kind)
    if kind == "adam":
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, capturable=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(5):
            step(m, opt, xb, yb)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step(m, opt, xb, yb)
    for _ in range(50):
        g.replay()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        g.replay()
    torch.cuda.synchronize()
    graph = (time.perf_counter() - t) / n
    print(json.dumps({"impl": "torch", "optimizer": kind, "eager_step_ms": eager * 1e3, "cuda_graph_step_ms": graph * 1e3}), flush=True)

# one epoch, eager Adam, host batches moved per step like a data loader
m, opt = model_and_opt("adam")
perm = torch.randperm(x.shape[0])
torch.cuda.synchronize()
t = time.perf_counter()
for i in range(x.shape[0] // 32):
    idxs = perm[i * 32:(i + 1) * 32]
    step(m, opt, x[idxs].to(dev, non_blocking=True), y[idxs].to(dev, non_blocking=True))
torch.cuda.synchronize()
print(json.dumps({"impl": "torch", "optimizer": "adam", "epoch_s": time.perf_counter() - t, "steps": x.shape[0] // 32}), flush=True)
