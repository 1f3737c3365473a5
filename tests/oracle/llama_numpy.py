#!/usr/bin/env python3
"""An independent numpy Llama forward (Hugging Face LlamaForCausalLM semantics, written from the model's
definition, not from meganeura's graph) for tests/oracle/test_llama_numpy.cpp.

Usage: llama_numpy.py IN.json OUT.json. IN holds the config, the weights by GGUF name ([out, in] matrices) and
the tokens of one sequence; OUT gets the logits of every position, [len(tokens), vocab], computed in float64
with a causal mask over the whole sequence at once (no cache).
"""
import json
import sys

import numpy as np


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, theta):
    # x [heads, seq, d]; rotate_half: pairs (i, i + d/2) rotated by pos * theta^(-2i/d)
    _, s, d = x.shape
    inv = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], axis=-1)
    sin = np.concatenate([np.sin(ang), np.sin(ang)], axis=-1)
    half = d // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rot * sin


def forward(cfg, w, tokens):
    h, heads, kv, inter = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["intermediate"]
    d = h // heads
    eps, theta = cfg["rms_eps"], cfg["rope_theta"]
    W = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    emb = W["token_embd.weight"].reshape(cfg["vocab"], h)
    x = emb[np.asarray(tokens)]
    s = x.shape[0]
    causal = np.triu(np.full((s, s), -np.inf), k=1)
    for n in range(cfg["layers"]):
        p = lambda leaf, r, c: W["blk.%d.%s" % (n, leaf)].reshape(r, c)
        a = rms_norm(x, W["blk.%d.attn_norm.weight" % n], eps)
        # q/k/v biases (Qwen2) where the weights have them
        bias = lambda leaf: W.get("blk.%d.%s.bias" % (n, leaf), 0.0)
        q = (a @ p("attn_q.weight", heads * d, h).T + bias("attn_q")).reshape(s, heads, d).transpose(1, 0, 2)
        k = (a @ p("attn_k.weight", kv * d, h).T + bias("attn_k")).reshape(s, kv, d).transpose(1, 0, 2)
        v = (a @ p("attn_v.weight", kv * d, h).T + bias("attn_v")).reshape(s, kv, d).transpose(1, 0, 2)
        q, k = rope(q, theta), rope(k, theta)
        rep = heads // kv
        k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
        sc = q @ k.transpose(0, 2, 1) / np.sqrt(d) + causal
        sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
        o = (sc / sc.sum(axis=-1, keepdims=True)) @ v
        x = x + o.transpose(1, 0, 2).reshape(s, heads * d) @ p("attn_output.weight", h, heads * d).T
        m = rms_norm(x, W["blk.%d.ffn_norm.weight" % n], eps)
        g = m @ p("ffn_gate.weight", inter, h).T
        u = m @ p("ffn_up.weight", inter, h).T
        x = x + ((g / (1.0 + np.exp(-g))) * u) @ p("ffn_down.weight", h, inter).T
    x = rms_norm(x, W["output_norm.weight"], eps)
    head = emb if cfg["tied"] else W["output.weight"].reshape(cfg["vocab"], h)
    return x @ head.T


def main():
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    logits = forward(doc["config"], doc["weights"], doc["tokens"])
    with open(sys.argv[2], "w") as f:
        json.dump({"logits": logits.tolist()}, f)


if __name__ == "__main__":
    main()
