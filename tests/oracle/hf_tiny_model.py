#!/usr/bin/env python3
"""A tiny random Llama as a Hugging Face model folder, and its expected logits, for tests/oracle/test_hf_model.cpp.

    hf_tiny_model.py OUT_DIR VARIANT       VARIANT: f32 (one file, tied embeddings) or f16-sharded (two shards
                                           and an index, f16 weights, an untied lm_head)

Writes OUT_DIR/{config.json, model.safetensors | model-0000N-of-00002.safetensors + index, tokenizer.json,
tokenizer_config.json, generation_config.json} with PyPI's safetensors, tokenizers and numpy, and
OUT_DIR/expected.json: the prompt, its ids as `tokenizers` encodes them, and the logits of every position from
a float64 numpy forward written here from LlamaForCausalLM's definition, in Hugging Face tensor names.
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
            "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
PROMPT = "<|im_start|>user\nHello, tiny world! 42 cats sat.<|im_end|>"
TEXTS = ["Hello world, the cat sat on the mat.", "Tiny models say hello 12345 times.", "user assistant system",
         "def f(x):\n    return x * 2", "the quick brown fox jumps over the lazy dog"] * 4


def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXTS, trainer=trainer)
    return tok


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate(x, theta):  # x [heads, seq, d]; LlamaRotaryEmbedding + rotate_half
    _, s, d = x.shape
    inv = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    ang = np.outer(np.arange(s, dtype=np.float64), inv)
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    return x * cos + np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1) * sin


def forward(cfg, W, ids):
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg["hidden_size"] // H
    eps = cfg["rms_norm_eps"]
    x = W["model.embed_tokens.weight"][ids]
    s = len(ids)
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for n in range(cfg["num_hidden_layers"]):
        L = lambda k: W["model.layers.%d.%s" % (n, k)]
        h = rms_norm(x, L("input_layernorm.weight"), eps)
        q = (h @ L("self_attn.q_proj.weight").T).reshape(s, H, d).transpose(1, 0, 2)
        k = (h @ L("self_attn.k_proj.weight").T).reshape(s, Hkv, d).transpose(1, 0, 2)
        v = (h @ L("self_attn.v_proj.weight").T).reshape(s, Hkv, d).transpose(1, 0, 2)
        q, k = rotate(q, cfg["rope_theta"]), rotate(k, cfg["rope_theta"])
        k, v = np.repeat(k, H // Hkv, 0), np.repeat(v, H // Hkv, 0)
        a = q @ k.transpose(0, 2, 1) / np.sqrt(d) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        x = x + (a @ v).transpose(1, 0, 2).reshape(s, H * d) @ L("self_attn.o_proj.weight").T
        h = rms_norm(x, L("post_attention_layernorm.weight"), eps)
        g, u = h @ L("mlp.gate_proj.weight").T, h @ L("mlp.up_proj.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ L("mlp.down_proj.weight").T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.T


def main():
    out, variant = sys.argv[1], sys.argv[2]
    assert variant in ("f32", "f16-sharded"), variant
    os.makedirs(out, exist_ok=True)
    tok = tokenizer()
    tok.save(os.path.join(out, "tokenizer.json"))
    tied = variant == "f32"
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": tok.get_vocab_size() + 4,
           "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 6, "num_key_value_heads": 2,
           "intermediate_size": 64, "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": tied,
           "hidden_act": "silu", "max_position_embeddings": 32, "rope_scaling": None, "attention_bias": False,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32" if tied else "float16"}
    V, h, i, H, Hkv = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"], 6, 2
    d = h // H
    rng = np.random.default_rng(3 if tied else 4)
    shapes = {"model.embed_tokens.weight": (V, h), "model.norm.weight": (h,)}
    if not tied:
        shapes["lm_head.weight"] = (V, h)
    for n in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % n
        shapes.update({p + "input_layernorm.weight": (h,), p + "self_attn.q_proj.weight": (H * d, h),
                       p + "self_attn.k_proj.weight": (Hkv * d, h), p + "self_attn.v_proj.weight": (Hkv * d, h),
                       p + "self_attn.o_proj.weight": (h, H * d), p + "post_attention_layernorm.weight": (h,),
                       p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
                       p + "mlp.down_proj.weight": (h, i)})
    dtype = np.float32 if tied else np.float16
    W = {}
    for name, shape in shapes.items():
        v = rng.uniform(0.9, 1.1, shape) if "norm" in name else rng.normal(0.0, 0.2 if "embed" in name else 0.1, shape)
        W[name] = v.astype(dtype)
    if tied:
        save_file(W, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    else:
        names = sorted(W)
        shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
        weight_map = {}
        for f, part in shards.items():
            save_file({k: W[k] for k in part}, os.path.join(out, f), metadata={"format": "pt"})
            weight_map.update({k: f for k in part})
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
            json.dump({"metadata": {"total_size": sum(w.nbytes for w in W.values())}, "weight_map": weight_map}, fh)
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as fh:
        json.dump({"add_prefix_space": False, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                   "unk_token": "<|endoftext|>", "chat_template": TEMPLATE, "model_max_length": 32}, fh)
    with open(os.path.join(out, "generation_config.json"), "w") as fh:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, 0]}, fh)
    ids = tok.encode(PROMPT).ids
    logits = forward(cfg, {k: v.astype(np.float64) for k, v in W.items()}, ids)
    with open(os.path.join(out, "expected.json"), "w") as fh:
        json.dump({"prompt": PROMPT, "ids": ids, "logits": logits.tolist(), "template": TEMPLATE,
                   "vocab": V, "tied": tied}, fh)


if __name__ == "__main__":
    main()
