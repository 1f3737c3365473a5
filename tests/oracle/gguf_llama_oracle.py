#!/usr/bin/env python3
"""Small random `llama` and `qwen2` GGUF files written by PyPI gguf's GGUFWriter the way llama.cpp's converter
writes them, with the logits an independent numpy forward (llama_numpy.py) computes from the Hugging Face
layout of the same (de)quantized weights. For tests/oracle/test_gguf_model.cpp.

    gguf_llama_oracle.py OUT_DIR     writes OUT_DIR/CASE.gguf and OUT_DIR/CASE.json for every case

Facts from llama.cpp's convert_hf_to_gguf.py: a `llama` file stores attn_q / attn_k with the rows of each head
permuted (w.reshape(n_head, 2, d / 2, ...).swapaxes(1, 2)) for ggml's interleaved-pair RoPE; `qwen2` stores
them unpermuted (NeoX RoPE) and has q/k/v biases. Quantization is row-wise along the input dimension, so
quantizing a permuted matrix permutes the quantized rows.
"""
import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter, quants

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_numpy import forward  # noqa: E402


def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


CASES = {
    # SmolLM2-like: tied embedding, Q8_0 embedding, Q4_1 / Q5_0 / F16 / BF16 matrices, f32 norms, SPM tokenizer
    "llama_mixed": dict(arch="llama", vocab=50, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=96,
                        rope_theta=10000.0, rms_eps=1e-5, context=32, tied=True, bias=False,
                        types={"token_embd": T.Q8_0, "attn_q": T.Q4_1, "attn_k": T.Q8_0, "attn_v": T.F16,
                               "attn_output": T.Q5_0, "ffn_gate": T.Q4_1, "ffn_up": T.BF16, "ffn_down": T.Q8_0}),
    # Qwen2-like: own output matrix, q/k/v biases, f32 and f16 weights, gpt2-style metadata absent
    "qwen2_bias": dict(arch="qwen2", vocab=40, hidden=64, layers=2, heads=8, kv_heads=2, intermediate=64,
                       rope_theta=1000000.0, rms_eps=1e-6, context=24, tied=False, bias=True,
                       types={"token_embd": T.F16, "output": T.Q8_0, "attn_q": T.F32, "attn_k": T.F16,
                              "attn_v": T.Q4_1, "attn_output": T.F16, "ffn_gate": T.F32, "ffn_up": T.F16,
                              "ffn_down": T.F32}),
}


def spm_tokenizer(w, vocab):
    tokens = ["<unk>", "<s>", "</s>", "<|im_end|>"] + ["\u2581" + chr(97 + i % 26) * (1 + i // 26) for i in range(vocab - 4)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 4 + [-float(i) for i in range(vocab - 4)])
    w.add_token_types([2, 3, 3, 3] + [1] * (vocab - 4))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")


def make(name, c, out_dir, rng):
    d = c["hidden"] // c["heads"]
    shapes = {"token_embd.weight": (c["vocab"], c["hidden"]), "output_norm.weight": (c["hidden"],)}
    if not c["tied"]:
        shapes["output.weight"] = (c["vocab"], c["hidden"])
    for n in range(c["layers"]):
        b = "blk.%d." % n
        shapes.update({b + "attn_norm.weight": (c["hidden"],), b + "ffn_norm.weight": (c["hidden"],),
                       b + "attn_q.weight": (c["heads"] * d, c["hidden"]), b + "attn_k.weight": (c["kv_heads"] * d, c["hidden"]),
                       b + "attn_v.weight": (c["kv_heads"] * d, c["hidden"]), b + "attn_output.weight": (c["hidden"], c["heads"] * d),
                       b + "ffn_gate.weight": (c["intermediate"], c["hidden"]), b + "ffn_up.weight": (c["intermediate"], c["hidden"]),
                       b + "ffn_down.weight": (c["hidden"], c["intermediate"])})
        if c["bias"]:
            shapes.update({b + "attn_q.bias": (c["heads"] * d,), b + "attn_k.bias": (c["kv_heads"] * d,),
                           b + "attn_v.bias": (c["kv_heads"] * d,)})

    w = GGUFWriter(os.path.join(out_dir, name + ".gguf"), c["arch"])
    a = c["arch"]
    w.add_context_length(c["context"])
    w.add_embedding_length(c["hidden"])
    w.add_block_count(c["layers"])
    w.add_feed_forward_length(c["intermediate"])
    w.add_head_count(c["heads"])
    w.add_head_count_kv(c["kv_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_eps"])
    w.add_rope_dimension_count(d)
    if a == "llama":
        spm_tokenizer(w, c["vocab"])

    oracle = {}  # Hugging Face layout, the values the file holds
    for tname, shape in shapes.items():
        leaf = tname.split(".")[-2]
        norm = "norm" in tname
        v = (rng.uniform(0.9, 1.1, shape) if norm else rng.normal(0.0, 0.3 if "bias" in tname else 0.02, shape)).astype(np.float32)
        t = T.F32 if norm or tname.endswith(".bias") else c["types"][leaf]
        held = quants.dequantize(quants.quantize(v, t), t) if t != T.F32 else v
        oracle[tname] = held.astype(np.float64).reshape(-1).tolist()
        stored = v
        if a == "llama" and leaf in ("attn_q", "attn_k"):
            stored = permute(v, c["heads"] if leaf == "attn_q" else c["kv_heads"])
        if t == T.F32:
            w.add_tensor(tname, stored)
        elif t == T.F16:
            w.add_tensor(tname, stored.astype(np.float16))
        else:
            w.add_tensor(tname, quants.quantize(stored, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    tokens = [int(x) for x in rng.integers(0, c["vocab"], 12)]
    cfg = {"vocab": c["vocab"], "hidden": c["hidden"], "layers": c["layers"], "heads": c["heads"],
           "kv_heads": c["kv_heads"], "intermediate": c["intermediate"], "rope_theta": c["rope_theta"],
           "rms_eps": c["rms_eps"], "tied": c["tied"]}
    logits = forward(cfg, oracle, tokens)
    doc = {"config": dict(cfg, context=c["context"], arch=a, bias=c["bias"]), "tokens": tokens,
           "logits": logits.tolist(), "types": {k: v.name for k, v in c["types"].items()}}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(doc, f)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(11)
    for name, c in CASES.items():
        make(name, c, out, rng)


if __name__ == "__main__":
    main()
