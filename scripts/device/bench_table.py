#!/usr/bin/env python3
"""The issue-7 table from the JSON lines of one bench_all.sh run (ours and torch's, same call).
    python3 scripts/device/bench_table.py OUT_DIR/*.jsonl"""
import json
import sys


def rows(paths):
    out = []
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return out


def pick(rs, **kw):
    for r in rs:
        if all(r.get(k) == v for k, v in kw.items()) and "error" not in r:
            return r
    return None


def f(v, d=2):
    return "-" if v is None else f"{v:.{d}f}"


def main():
    rs = rows(sys.argv[1:])
    print("| measure | meganeura | PyTorch | ratio (ours/torch) | target |")
    print("|---|---|---|---|---|")
    for size in (1024, 4096, 8192):
        t32 = pick(rs, bench="torch_matmul", dtype="f32", layout="nn", m=size)
        t16 = pick(rs, bench="torch_matmul", dtype="f16", layout="nn", m=size)
        for tier, dtype, ref, label in (("scalar", "f32", t32, "f32 (TF32 off)"),
                                        ("coopmat-nv", "f16", t16, "f16→f32 coopmat-nv"),
                                        ("coopmat-khr", "f16", t16, "f16→f32 coopmat-khr")):
            for r in [x for x in rs if x.get("bench") == "vk_matmul" and x.get("tier") == tier
                      and x.get("m") == size and x.get("layout") == "nn" and "error" not in x]:
                lab = label + (" (f32 buffers, Mixed16)" if r.get("kernel", "").endswith("f32-in") else "")
                ours, theirs = r["tflops_median"], ref["tflops_median"] if ref else None
                target = ""
                if size == 8192:
                    target = "≥ 0.7" if dtype == "f32" else "≥ 0.5 (stretch 0.7)"
                ok = "" if r.get("correct") else " (spot check FAILED)"
                print(f"| matmul {size}³ {lab}, TFLOP/s{ok} | {f(ours, 1)} | {f(theirs, 1)} | "
                      f"{f(ours / theirs) if theirs else '-'} | {target} |")
    for mib in sorted({r["mib"] for r in rs if r.get("bench") == "vk_pointwise"}):
        pw = pick(rs, bench="vk_pointwise", mib=mib)
        cp = pick(rs, bench="vk_copy_vec4", bytes=mib << 20)
        tpw, tcp = pick(rs, bench="torch_pointwise", mib=mib), pick(rs, bench="torch_copy", mib=mib)
        print(f"| fused pointwise x·1.5+y, {mib} MiB operands, GB/s (vs our vec4 copy) | {f(pw and pw['gbps_median'], 0)} | "
              f"copy {f(cp and cp['gbps_median'], 0)} | {f(pw['gbps_median'] / cp['gbps_median']) if pw and cp else '-'} | ≥ 0.85 |")
        if tpw and tcp:
            print(f"| torch's own x·1.5+y vs torch copy_, {mib} MiB, GB/s | - | {f(tpw['gbps_median'], 0)} / "
                  f"{f(tcp['gbps_median'], 0)} | torch {f(tpw['gbps_median'] / tcp['gbps_median'])} of its copy | |")
        if pw and tpw:
            print(f"| fused pointwise {mib} MiB, ours vs torch's, GB/s | {f(pw['gbps_median'], 0)} | "
                  f"{f(tpw['gbps_median'], 0)} | {f(pw['gbps_median'] / tpw['gbps_median'])} | |")
    for opt in ("sgd", "adam"):
        t = pick(rs, bench="torch_mlp_step", optimizer=opt)
        for prec in ("f32", "mixed16"):
            v = pick(rs, bench="vk_mlp_step", optimizer=opt, precision=prec)
            if not v:
                continue
            name = f"MLP step {opt.upper() if opt == 'sgd' else 'Adam'} {prec}"
            if t:
                # Pipelined on both sides: our step() in a loop (frames in flight), torch's eager steps and graph
                # replays; one wait at the end. Rows from before wall_ms_pipelined fall back to the synchronised time.
                piped = v.get("wall_ms_pipelined", v["wall_ms_mean"])
                print(f"| {name}: pipelined wall ms vs torch eager (pipelined) | {f(piped, 4)} | "
                      f"{f(t['eager_wall_ms'], 4)} | {f(piped / t['eager_wall_ms'], 3)} | |")
                tgt = "≤ 0.5" if opt == "adam" and prec == "f32" else ""
                print(f"| {name}: pipelined wall ms ({v.get('frames_in_flight', 1)} frames) vs torch CUDA graph "
                      f"(pipelined) | {f(piped, 4)} | {f(t['graph_wall_ms'], 4)} | "
                      f"{f(piped / t['graph_wall_ms'], 3)} | {tgt} |")
                print(f"| {name}: wall ms vs torch CUDA graph synchronised each step | {f(v['wall_ms_mean'], 4)} | "
                      f"{f(t['graph_sync_wall_ms'], 4)} | {f(v['wall_ms_mean'] / t['graph_sync_wall_ms'], 3)} | |")
                print(f"| {name}: GPU ms vs torch eager / CUDA graph GPU ms | {f(v['gpu_ms_median'], 4)} | "
                      f"{f(t['eager_gpu_ms'], 4)} / {f(t['graph_gpu_ms'], 4)} | "
                      f"{f(v['gpu_ms_median'] / t['eager_gpu_ms'], 3)} / {f(v['gpu_ms_median'] / t['graph_gpu_ms'], 3)} | |")
            else:
                print(f"| {name}: wall / pipelined wall / GPU ms | {f(v['wall_ms_mean'], 4)} / "
                      f"{f(v.get('wall_ms_pipelined'), 4)} / {f(v['gpu_ms_median'], 4)} | - | - | |")
    for opt in ("adam", "sgd"):
        e = pick(rs, bench="vk_epoch", optimizer=opt)
        t = pick(rs, impl="torch", optimizer=opt, steps=1875) if opt == "adam" else None
        if e:
            ours = 1875 / e["steps_per_s"]
            theirs = t["epoch_s"] if t else None
            print(f"| 1875-step epoch ({opt}, Trainer + DataLoader), s | {f(ours, 3)} | {f(theirs, 3)} | "
                  f"{f(ours / theirs, 3) if theirs else '-'} | {'≤ 0.1 (10× faster)' if opt == 'adam' else ''} |")


if __name__ == "__main__":
    main()
