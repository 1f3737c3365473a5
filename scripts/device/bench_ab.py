#!/usr/bin/env python3
"""Ratio table of two bench_ab.sh sides: every JSON record is keyed by its non-numeric fields and sizes; each
numeric figure (medians, means) is the median over rounds, shown A, B and B/A.
    python3 scripts/device/bench_ab.py A.jsonl B.jsonl"""
import json
import statistics
import sys

KEY_NUMBERS = {"m", "n", "k", "mib", "bytes", "batch", "steps", "size"}


def load(path):
    groups = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "error" in r:
                continue
            key = tuple(sorted((k, v) for k, v in r.items()
                               if isinstance(v, str) or (k in KEY_NUMBERS and isinstance(v, (int, float)))))
            vals = {k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                    and k not in KEY_NUMBERS and ("median" in k or "mean" in k or k.endswith("_s")
                                                   or k.endswith("_ms") or k in ("accuracy",))}
            g = groups.setdefault(key, {})
            for k, v in vals.items():
                g.setdefault(k, []).append(v)
    return groups


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    print("| measure | figure | A (before) | B (after) | B/A |")
    print("|---|---|---|---|---|")
    for key in sorted(set(a) & set(b), key=str):
        label = ", ".join(f"{k}={v}" for k, v in key if k not in ("kernel",))
        for fig in sorted(set(a[key]) & set(b[key])):
            va, vb = statistics.median(a[key][fig]), statistics.median(b[key][fig])
            ratio = f"{vb / va:.3f}" if va else "-"
            print(f"| {label} | {fig} | {va:.4g} | {vb:.4g} | {ratio} |")
    only = [str(k) for k in set(a) ^ set(b)]
    if only:
        print(f"\n{len(only)} records on one side only (kernel names or shapes that differ between the builds)")


if __name__ == "__main__":
    main()
