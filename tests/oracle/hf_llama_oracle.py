#!/usr/bin/env python3
"""A float64 numpy LlamaForCausalLM over a Hugging Face model folder (config.json, model.safetensors, tokenizer.json),
written from the model's definition with PyPI's safetensors and tokenizers, for the opt-in real-model test
(tests/oracle/test_hf_model.cpp, HfRealModel.*; scripts/check-real-hf.sh).

    hf_llama_oracle.py DIR PROMPT_FILE STEPS OUT_PREFIX

Encodes the prompt (UTF-8 text, special tokens parsed, no BOS added as tokenizer.json says) with `tokenizers`,
computes the logits of every prompt position, then generates STEPS tokens greedily through a KV cache.
Writes OUT_PREFIX.json {"ids", "generated", "gaps"} (gaps: top-1 minus top-2 logit at each generation step)
and OUT_PREFIX.f32: float32 logits, the prompt's rows, then the row after each generated token but the last
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer


class Llama:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.c = json.load(f)
        self.W = {k: v.astype(np.float64) for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
        self.H, self.Hkv = self.c["num_attention_heads"], self.c["num_key_value_heads"]
        self.d = self.c["hidden_size"] // self.H
        self.cache = [([], []) for _ in range(self.c["num_hidden_layers"])]
        self.pos = 0

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + self.c["rms_norm_eps"]) * w

    def rope(self, x, start):  # [heads, s, d], rotate_half
        _, s, d = x.shape
        inv = 1.0 / self.c["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.outer(np.arange(start, start + s, dtype=np.float64), inv)
        ang = np.concatenate([ang, ang], -1)
        return x * np.cos(ang) + np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1) * np.sin(ang)

    def step(self, ids):
        """Logits of every new token; their keys and values join the cache."""
        W, H, Hkv, d, s, p0 = self.W, self.H, self.Hkv, self.d, len(ids), self.pos
        x = W["model.embed_tokens.weight"][ids]
        total = p0 + s
        mask = np.where(np.arange(total)[None, :] <= (p0 + np.arange(s))[:, None], 0.0, -np.inf)
        for n in range(self.c["num_hidden_layers"]):
            L = lambda k: W["model.layers.%d.%s" % (n, k)]
            h = self.norm(x, L("input_layernorm.weight"))
            q = self.rope((h @ L("self_attn.q_proj.weight").T).reshape(s, H, d).transpose(1, 0, 2), p0)
            k = self.rope((h @ L("self_attn.k_proj.weight").T).reshape(s, Hkv, d).transpose(1, 0, 2), p0)
            v = (h @ L("self_attn.v_proj.weight").T).reshape(s, Hkv, d).transpose(1, 0, 2)
            ks, vs = self.cache[n]
            ks.append(k)
            vs.append(v)
            K, V = np.concatenate(ks, 1), np.concatenate(vs, 1)
            K, V = np.repeat(K, H // Hkv, 0), np.repeat(V, H // Hkv, 0)
            a = q @ K.transpose(0, 2, 1) / np.sqrt(d) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            x = x + (a @ V).transpose(1, 0, 2).reshape(s, H * d) @ L("self_attn.o_proj.weight").T
            h = self.norm(x, L("post_attention_layernorm.weight"))
            g, u = h @ L("mlp.gate_proj.weight").T, h @ L("mlp.up_proj.weight").T
            x = x + (g / (1 + np.exp(-g)) * u) @ L("mlp.down_proj.weight").T
        self.pos += s
        x = self.norm(x, W["model.norm.weight"])
        head = W["model.embed_tokens.weight"] if self.c["tie_word_embeddings"] else W["lm_head.weight"]
        return x @ head.T


def main():
    folder, prompt_file, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(prompt_file, encoding="utf-8") as f:
        prompt = f.read()
    ids = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(prompt).ids
    m = Llama(folder)
    rows = [m.step(ids)]
    generated, gaps = [], []
    last = rows[0][-1]
    for _ in range(steps):
        top = np.argsort(last)[::-1][:2]
        generated.append(int(top[0]))
        gaps.append(float(last[top[0]] - last[top[1]]))
        last = m.step([int(top[0])])[0]
        rows.append(last[None, :])
    np.concatenate(rows[:-1] if steps else rows, 0).astype(np.float32).tofile(out + ".f32")
    with open(out + ".json", "w") as f:
        json.dump({"ids": ids, "generated": generated, "gaps": gaps}, f)


if __name__ == "__main__":
    main()
