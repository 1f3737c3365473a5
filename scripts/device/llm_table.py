#!/usr/bin/env python3
"""Side-by-side table of bench_llm (vk_llm) and llm_torch.py (torch_llm) JSON lines, read from the files named on
the command line (or stdin): one row per (precision, mode, batch, seq) with our wall/GPU ms, dispatches, torch
eager and torch.compile wall ms, and our wall time over each. Then our top kernel families per configuration."""
import json
import sys


def rows(paths):
    for p in paths or ["-"]:
        with (sys.stdin if p == "-" else open(p)) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        pass


def main():
    ours, torch = {}, {}
    for r in rows(sys.argv[1:]):
        key = (r.get("precision"), r.get("mode"), r.get("batch"), r.get("seq"))
        if r.get("bench") == "vk_llm":
            ours[key] = r
        elif r.get("bench") == "torch_llm":
            torch[(r.get("impl"),) + key] = r

    def ms(r, field="wall_ms"):
        return "error" if r is None or "error" in r else "%.2f" % r[field]

    print("| precision | mode | batch | seq | ours wall ms | ours GPU ms | dispatches | eager ms | compile ms |"
          " ours / eager | ours / compile |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(set(ours) | {k[1:] for k in torch}, key=lambda k: tuple(str(x) for x in k)):
        o, e, c = ours.get(key), torch.get(("eager",) + key), torch.get(("compile",) + key)

        def ratio(t):
            if o is None or t is None or "error" in o or "error" in t:
                return "-"
            return "%.2f" % (o["wall_ms"] / t["wall_ms"])

        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            *key, ms(o), ms(o, "gpu_ms"), "-" if o is None or "error" in o else o.get("dispatches", "-"),
            ms(e) if e else "-", ms(c) if c else "-", ratio(e), ratio(c)))
    print()
    for key, o in sorted(ours.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if "families" not in o:
            continue
        top = ", ".join("%s %d× %.2f ms" % (f, n, t) for f, n, t in o["families"][:6])
        print("- %s %s b%s s%s: %s" % (*key, top))


if __name__ == "__main__":
    main()
