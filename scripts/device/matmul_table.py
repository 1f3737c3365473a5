#!/usr/bin/env python3
"""Joins bench_matmul's and matmul_torch.py's JSON lines into a Markdown table of TFLOP/s and ratios.
    python3 scripts/device/matmul_table.py vk.jsonl torch.jsonl
Each Vulkan tier is compared with torch at the same size, layout and input type (scalar f32 vs torch f32 with
TF32 off; the cooperative tiers, f16 in and f32 accumulation, vs torch f16)."""
import json
import sys


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def main():
    vk, torch_rows = read(sys.argv[1]), read(sys.argv[2])
    ref = {(r["dtype"], r["layout"], r["m"], r.get("n", r["m"]), r.get("k", r["m"])): r
           for r in torch_rows if r.get("bench") == "torch_matmul"}
    print("| tier | variant | kernel | input | layout | size | Vulkan ms | Vulkan TFLOP/s | torch ms | torch TFLOP/s "
          "| ratio | spot check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in vk:
        if r.get("bench") != "vk_matmul":
            continue
        m, n, k = r["m"], r.get("n", r["m"]), r.get("k", r["m"])
        size = f"{m}³" if m == n == k else f"{m}x{n}x{k}"
        variant = r.get("variant", "") + (" (rule)" if r.get("rule") else "")
        # Mixed16 rows read f32 buffers rounded to f16: torch's peer is f16 (the same precision of products).
        dtype = "f16" if r.get("mixed16") else r["dtype"]
        if "error" in r:
            print(f'| {r["tier"]} | {variant} | | {dtype} | {r["layout"]} | {size} | error | | | | | {r["error"][:80]} |')
            continue
        t = ref.get((dtype, r["layout"], m, n, k))
        tms = f'{t["median_ms"]:.4f}' if t else "-"
        tt = f'{t["tflops_median"]:.2f}' if t else "-"
        ratio = f'{r["tflops_median"] / t["tflops_median"]:.2f}' if t else "-"
        check = "ok" if r.get("correct") else f'WRONG ({r.get("max_rel_err")})'
        kern = r.get("kernel", "") + (" -O" if r.get("spirv_opt") else "")
        print(f'| {r["tier"]} | {variant} | {kern} | {dtype} | {r["layout"]} | {size} | {r["median_ms"]:.4f} '
              f'| {r["tflops_median"]:.2f} | {tms} | {tt} | {ratio} | {check} |')


if __name__ == "__main__":
    main()
