#!/usr/bin/env python3
"""torch side of bench/bench_llm.cpp: SmolLM2-135M's configuration as a small hand-written Llama (vocabulary
49152 x 576 tied to the head, 30 blocks of 9 heads over 3 KV heads, SwiGLU 1536, RMSNorm, RoPE theta 1e5;
seeded random weights), eager and torch.compile, the same three figures and JSON fields:
  forward  logits of [batch, seq] tokens (inference mode)
  token    the same for [batch, 1] (no KV cache, as bench_llm)
  train    an Adam step (lr 1e-4, torch's default foreach implementation) with mean cross-entropy on index labels
wall_ms: mean of --steps synchronised steps after --warmup; gpu_ms: CUDA events around one step, median.
mixed16 runs under torch.autocast(float16) (f16 products, f32 accumulation and master weights, no loss scaling),
f32 with float32 matmuls at full precision (no TF32), as ours.
    python3 scripts/device/llm_torch.py [--layers 30] [--batches 1,8] [--seqs 128,512] [--impls eager,compile]
"""
import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden, eps):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.attn_norm = torch.nn.RMSNorm(dim, eps=eps)
        self.qkv = torch.nn.Linear(dim, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.o = torch.nn.Linear(heads * self.hd, dim, bias=False)
        self.ffn_norm = torch.nn.RMSNorm(dim, eps=eps)
        self.gate = torch.nn.Linear(dim, hidden, bias=False)
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        p = self.qkv(self.attn_norm(x))
        q, k, v = p.split([self.heads * self.hd, self.kv_heads * self.hd, self.kv_heads * self.hd], dim=-1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv_heads, self.hd).transpose(1, 2)

        def rope(t):
            t1, t2 = t.chunk(2, dim=-1)
            return t * cos + torch.cat((-t2, t1), dim=-1) * sin

        a = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        h = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class CausalLm(torch.nn.Module):
    def __init__(self, layers, vocab=49152, dim=576, heads=9, kv_heads=3, hidden=1536, eps=1e-5, theta=1e5):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        torch.nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = torch.nn.ModuleList(Block(dim, heads, kv_heads, hidden, eps) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(dim, eps=eps)
        hd = dim // heads
        self.register_buffer("inv_freq", theta ** (-torch.arange(0, hd, 2).float() / hd), persistent=False)

    def forward(self, tokens):
        s = tokens.shape[1]
        f = torch.outer(torch.arange(s, device=tokens.device).float(), self.inv_freq)
        f = torch.cat((f, f), dim=-1)
        cos, sin = f.cos(), f.sin()
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, cos, sin)
        return self.norm(x) @ self.embed.weight.t()  # the head tied to the embedding


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def measure(args, impl, mode, batch, seq, precision, dev):
    torch.manual_seed(42)
    s = 1 if mode == "token" else seq
    model = CausalLm(args.layers).to(dev)
    run_model = torch.compile(model) if impl == "compile" else model
    tokens = torch.randint(0, 49152, (batch, s), device=dev)
    labels = torch.roll(tokens, -1, dims=1).reshape(-1)
    amp = (torch.autocast("cuda", dtype=torch.float16) if precision == "mixed16" else contextlib.nullcontext())
    if mode == "train":
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            with amp:
                loss = F.cross_entropy(run_model(tokens).reshape(-1, 49152).float(), labels)
            loss.backward()
            opt.step()
            return loss
    else:
        model.eval()

        def step():
            with torch.inference_mode(), amp:
                return run_model(tokens)
    t = time.perf_counter()
    for _ in range(args.warmup):
        out = step()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(args.steps):
        step()
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t) * 1e3 / args.steps
    gpu = []
    for _ in range(args.steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out = step()
        b.record()
        b.synchronize()
        gpu.append(a.elapsed_time(b))
    line = {"bench": "torch_llm", "impl": impl, "model": "smollm2-135m", "device": torch.cuda.get_device_name(),
            "mode": mode, "batch": batch, "seq": s, "layers": args.layers, "precision": precision,
            "wall_ms": wall, "gpu_ms": median(gpu), "warmup_s": compile_s,
            "memory_mib": torch.cuda.max_memory_allocated() / 2**20}
    if mode == "train":
        line["loss"] = float(out)
    print(json.dumps(line), flush=True)
    del model, run_model
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seqs", default="128,512")
    ap.add_argument("--precisions", default="f32,mixed16")
    ap.add_argument("--modes", default="forward,token,train")
    ap.add_argument("--impls", default="eager,compile")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    seqs = [int(x) for x in args.seqs.split(",")]
    for impl in args.impls.split(","):
        for precision in args.precisions.split(","):
            for batch in [int(x) for x in args.batches.split(",")]:
                for mode in args.modes.split(","):
                    for seq in seqs:
                        if mode == "token" and seq != seqs[0]:
                            continue
                        try:
                            measure(args, impl, mode, batch, seq, precision, "cuda")
                        except Exception as e:  # one failing configuration must not hide the others
                            print(json.dumps({"bench": "torch_llm", "impl": impl, "mode": mode, "batch": batch,
                                              "seq": seq, "precision": precision, "error": repr(e)[:500]}),
                                  flush=True)


if __name__ == "__main__":
    main()
