#!/usr/bin/env python3
"""hf_llama_oracle.py's job done by Hugging Face `transformers` (LlamaForCausalLM, float64, on the CPU): the
strongest independent oracle, opt-in because it needs torch. Same arguments and outputs:

    hf_transformers_oracle.py DIR PROMPT_FILE STEPS OUT_PREFIX

Runs under a Python with torch and transformers, e.g. Debian's /usr/bin/python3 (torch 1.13) with a venv made by
    /usr/bin/python3 -m venv --system-site-packages .models/tf-venv && .models/tf-venv/bin/pip install transformers==4.40.2
(transformers 4.40 still supports torch 1.13). Greedy steps use the model's own KV cache (past_key_values).
"""
import json
import os
import sys

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast


def main():
    folder, prompt_file, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(prompt_file, encoding="utf-8") as f:
        prompt = f.read()
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        doc = json.load(f)
    # tokenizers >= 0.20 writes merges as [left, right] pairs; the tokenizers 0.19 of transformers 4.40 reads "left right"
    doc["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(doc)))
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    model = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float64, attn_implementation="eager").eval()
    rows, generated, gaps = [], [], []
    with torch.no_grad():
        o = model(torch.tensor([ids]), use_cache=True)
        rows.append(o.logits[0].numpy())
        last, past = o.logits[0, -1], o.past_key_values
        for k in range(steps):
            top = torch.topk(last, 2)
            generated.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            if k + 1 == steps:
                break
            o = model(torch.tensor([[generated[-1]]]), past_key_values=past, use_cache=True)
            last, past = o.logits[0, -1], o.past_key_values
            rows.append(last.numpy()[None, :])
    np.concatenate(rows, 0).astype(np.float32).tofile(out + ".f32")
    with open(out + ".json", "w") as f:
        json.dump({"ids": ids, "generated": generated, "gaps": gaps}, f)


if __name__ == "__main__":
    main()
