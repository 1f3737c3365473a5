#!/usr/bin/env python3
"""Side-by-side table of bench_decode and decode_torch.py JSON lines (files named on the command line): one row
per (dtype, batch) with our prefill and decode figures, dispatches a decode step, and transformers eager and
static-cache + torch.compile at the matching float dtype (f32 -> float32, f16 / q8_0 / q4_1 -> float16), with
torch's time over ours (above 1: we are faster)."""
import json
import sys

TORCH_DTYPE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "q8_0": "float16", "q4_1": "float16",
               "q4_0": "float16"}


def rows(paths):
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        pass


def main():
    ours, plan, torch = {}, {}, {}
    for r in rows(sys.argv[1:]):
        b = r.get("bench")
        if "impl" in r:
            torch[(r["impl"], b, r["dtype"], r["batch"])] = r
        elif b in ("prefill", "decode"):
            ours[(b, r["dtype"], r["batch"])] = r
        elif b == "decode_plan":
            plan[(r["dtype"], r["batch"])] = r
    base = lambda d: d.split("/")[0]  # "f16/mixed16": bench_decode under MEGANEURA_PRECISION=mixed16
    keys = sorted({(d, bt) for _, d, bt in ours}, key=lambda k: (list(TORCH_DTYPE).index(base(k[0]))
                                                                   if base(k[0]) in TORCH_DTYPE else 99, k[1], k[0]))

    def f(x):
        return "-" if x is None else "%.3f" % x

    print("| dtype | batch | dispatches/step | prefill GPU ms | prefill wall ms | decode GPU ms/step |"
          " decode wall ms/step | tokens/s | torch dtype | eager ms/step | compiled ms/step |"
          " eager / ours | compiled / ours | prefill compiled ms |")
    print("|" + "---|" * 14)
    for d, bt in keys:
        p, dc, pl = ours.get(("prefill", d, bt)), ours.get(("decode", d, bt)), plan.get((d, bt))
        td = TORCH_DTYPE.get(base(d), "float32")
        te, tc = torch.get(("torch-eager", "decode", td, bt)), torch.get(("torch-compiled", "decode", td, bt))
        tp = torch.get(("torch-compiled", "prefill", td, bt))
        wall = dc["wall_ms_per_step"] if dc else None
        ratio = lambda t: "-" if t is None or not wall else "%.2f" % (t["wall_ms_per_step"] / wall)
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            d, bt, pl["dispatches"] if pl else "-", f(p and p["gpu_ms"]), f(p and p["wall_ms"]),
            f(dc and dc["gpu_ms_per_step"]), f(wall), dc["tokens_per_s"] if dc else "-", td,
            f(te and te["wall_ms_per_step"]), f(tc and tc["wall_ms_per_step"]), ratio(te), ratio(tc),
            f(tp and tp["wall_ms"])))
    for r in rows(sys.argv[1:]):
        if r.get("bench") == "decode_profile":
            top = ", ".join("%s %d× %.3f ms" % (fam, n, t) for fam, n, t in r["families"][:6])
            print("\n- profile %s b%s (sum %.3f ms): %s" % (r["dtype"], r["batch"], r["profile_sum_ms"], top))


if __name__ == "__main__":
    main()
