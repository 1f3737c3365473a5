#!/usr/bin/env python3
"""The PyTorch twin of bench/bench_decode.cpp: transformers' LlamaForCausalLM with SmolLM2-135M's configuration
and random weights (nothing downloaded), on one GPU. Prints JSON lines: prefill latency of a 128-token prompt and
decode tokens/s at batch 1 and 16, eager with the dynamic cache and with a static cache + torch.compile.

  python3 scripts/device/decode_torch.py [--dtype float32|float16|bfloat16] [--prompt 128] [--steps 64]
                                         [--batches 1,16] [--modes eager,compiled]
Decode runs generate() with min_new_tokens = max_new_tokens = steps (no early stop), greedy; tokens/s counts
generated tokens only, with the prefill's own time subtracted.
"""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def smollm2_135m():
    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5,
                       tie_word_embeddings=True, max_position_embeddings=2048, hidden_act="silu")


def timed(fn, reps=5):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--modes", default="eager,compiled")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    torch.manual_seed(0)
    model = LlamaForCausalLM(smollm2_135m()).to("cuda", dtype).eval()
    for mode in a.modes.split(","):
        kwargs = {}
        if mode == "compiled":
            # generate() compiles the forward itself for a static cache (CompileConfig: fullgraph, CUDA graphs) and
            # marks each CUDA-graph step; a forward compiled by hand here reuses graph outputs across steps.
            model.generation_config.cache_implementation = "static"
            model.generation_config.disable_compile = False
        else:
            model.generation_config.cache_implementation = None
        for batch in [int(b) for b in a.batches.split(",")]:
            ids = torch.randint(0, 49152, (batch, a.prompt), device="cuda")
            mask = torch.ones_like(ids)

            def gen(n):
                with torch.no_grad():
                    model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                   pad_token_id=0, **kwargs)

            for _ in range(3):  # warm-up (and compilation)
                gen(a.steps)
            prefill_ms = timed(lambda: gen(1))
            total_ms = timed(lambda: gen(a.steps + 1), reps=3)
            decode_ms = (total_ms - prefill_ms) / a.steps
            print(json.dumps({"bench": "prefill", "impl": "torch-" + mode, "dtype": a.dtype, "batch": batch,
                              "tokens": a.prompt, "wall_ms": round(prefill_ms, 4)}))
            print(json.dumps({"bench": "decode", "impl": "torch-" + mode, "dtype": a.dtype, "batch": batch,
                              "wall_ms_per_step": round(decode_ms, 4),
                              "tokens_per_s": round(batch * 1000.0 / decode_ms, 1)}))


if __name__ == "__main__":
    main()
