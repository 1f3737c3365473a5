#!/usr/bin/env python3
"""A GGUF file's tokenizer as plain arrays (meganeura's TokenizerData, as JSON) and as a Hugging Face
tokenizer.json, with PyPI's `gguf` and `tokenizers`.

    python3 scripts/gguf_tokenizer.py MODEL.gguf OUT_DIR     writes OUT_DIR/tokenizer.json and OUT_DIR/data.json

`tokenizer_json(data)` is the conversion: `gpt2` vocabularies become byte-level BPE with the pre-tokenizer
that llama.cpp's `tokenizer.ggml.pre` names; `llama` (SentencePiece-style) vocabularies become the BPE with
byte fallback that Hugging Face's Llama conversion makes (merges ordered by the merged piece's score, spaces as
U+2581, a U+2581 prepended to every text segment).
"""
import json
import sys

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")

UNKNOWN, CONTROL, USER_DEFINED = 2, 3, 4


def read_gguf(path: str) -> dict:
    """The tokenizer.ggml.* metadata of a GGUF file as TokenizerData fields."""
    from gguf import GGUFReader
    r = GGUFReader(path)

    def get(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    model = get("tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
        raise SystemExit(f"{path}: tokenizer.ggml.model is {model!r}; gpt2 and llama are supported")
    tokens = get("tokenizer.ggml.tokens")
    return {
        "model": model,
        "tokens": tokens,
        "scores": [float(x) for x in get("tokenizer.ggml.scores", [])],
        "token_types": [int(x) for x in get("tokenizer.ggml.token_type", [])],
        "merges": get("tokenizer.ggml.merges", []),
        "pre": get("tokenizer.ggml.pre", "gpt-2" if model == "gpt2" else ""),
        "bos_id": int(get("tokenizer.ggml.bos_token_id", -1)),
        "eos_id": int(get("tokenizer.ggml.eos_token_id", -1)),
        "unk_id": int(get("tokenizer.ggml.unknown_token_id", -1)),
        "pad_id": int(get("tokenizer.ggml.padding_token_id", -1)),
        "add_bos": bool(get("tokenizer.ggml.add_bos_token", model == "llama")),
        "add_eos": bool(get("tokenizer.ggml.add_eos_token", False)),
        "add_space_prefix": bool(get("tokenizer.ggml.add_space_prefix", True)),
        "chat_template": get("tokenizer.chat_template", ""),
    }


def spm_merges(tokens: list, scores: list) -> list:
    """Every split of every piece into two pieces, best merged-piece score first (the SentencePiece
    extraction of Hugging Face's Llama conversion)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, i in vocab.items():
        local = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges.extend((scores[i], lr) for lr in local)
    merges.sort(key=lambda e: -e[0])  # stable: ties keep the order above
    return [lr for _, lr in merges]


def tokenizer_json(data: dict) -> str:
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    tokens = data["tokens"]
    types = data["token_types"] or [1] * len(tokens)
    vocab = {t: i for i, t in enumerate(tokens)}
    if data["model"] == "gpt2":
        # llama.cpp splits a merge at its first space after the first character
        merges = [(m[:m.index(" ", 1)], m[m.index(" ", 1) + 1:]) for m in data["merges"]]
        pre = data["pre"]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=pre in ("llama3", "llama-bpe")))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if pre in ("gpt-2", "gpt2"):
            tok.pre_tokenizer = byte_level
        elif pre in ("smollm", "starcoder", "refact", "codeshell"):
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        elif pre in ("llama3", "llama-bpe", "qwen2"):
            from tokenizers import Regex
            regex = QWEN2_REGEX if pre == "qwen2" else LLAMA3_REGEX
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        else:
            raise SystemExit(f"tokenizer.ggml.pre {pre!r} is not converted")
        tok.decoder = decoders.ByteLevel()
    else:
        unk = tokens[data["unk_id"]] if data["unk_id"] >= 0 else None
        tok = Tokenizer(models.BPE(vocab=vocab, merges=spm_merges(tokens, data["scores"]), byte_fallback=True,
                                   unk_token=unk, fuse_unk=True))
        steps = [normalizers.Replace(" ", "\u2581")]
        if data["add_space_prefix"]:
            steps.insert(0, normalizers.Prepend("\u2581"))
        tok.normalizer = normalizers.Sequence(steps)
        dec = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
        if data["add_space_prefix"]:
            dec.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(dec)
    added = [AddedToken(t, special=ty != USER_DEFINED, normalized=False)
             for t, ty in zip(tokens, types) if ty in (UNKNOWN, CONTROL, USER_DEFINED)]
    tok.add_tokens(added)
    single, specials = [], []
    if data["add_bos"]:
        single.append(tokens[data["bos_id"]])
        specials.append((tokens[data["bos_id"]], data["bos_id"]))
    single.append("$A")
    if data["add_eos"]:
        single.append(tokens[data["eos_id"]])
        specials.append((tokens[data["eos_id"]], data["eos_id"]))
    if specials:
        tok.post_processor = processors.TemplateProcessing(single=" ".join(single), special_tokens=specials)
    return tok.to_str()


def main() -> None:
    import os
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    data = read_gguf(sys.argv[1])
    os.makedirs(sys.argv[2], exist_ok=True)
    with open(os.path.join(sys.argv[2], "data.json"), "w") as f:
        json.dump(data, f, ensure_ascii=False)
    with open(os.path.join(sys.argv[2], "tokenizer.json"), "w") as f:
        f.write(tokenizer_json(data))


if __name__ == "__main__":
    main()
