#!/usr/bin/env python3
"""Instruction mix of dumped pipelines (build/bin/pipeline_stats) or any disassembly text.

    python3 experiments/scripts/isa_mix.py DIR_OR_FILE... [--json] [--top N] [--all-sections]

Works on whatever text the driver gives: SASS (`/*0080*/ @P0 HMMA.16816.F32 R4, R8, R12, R4 ;`), PTX, NIR,
LLVM IR, SPIR-V (`%12 = OpFAdd %float %a %b`). For every line that looks like an instruction it counts the
mnemonic: the first token after stripping address comments, comments (`;`, `//`, `/* */`), predicates (`@P0`,
`@!PT`), braces and an assignment's destination (`%x = `, `ssa_5 = `); labels (`name:`), directives
(`.reg`, `#...`) and lines opening a block (`define void @main() {`) are not instructions. SASS modifiers are kept in the full mnemonic (`HMMA.16816.F32`) and
dropped in the base (`HMMA`).

pipeline_stats files are split at their `=== title ===` lines; each representation / SPIR-V section is
counted on its own (the `executable` sections hold statistics, not code, and are skipped unless
--all-sections). A file without such lines is one section. A binary representation (`.bin`) that is an ELF file
(a cubin, on NVIDIA) is disassembled with nvdisasm or cuobjdump -sass when either is on PATH, else named on
stderr. Standard library only (Debian python3).
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys

SECTION = re.compile(r"^=== (.*) ===\s*$")
MNEMONIC = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
BLOCK_COMMENT = re.compile(r"/\*.*?\*/")
PREDICATE = re.compile(r"^@!?[A-Za-z0-9_]+\s+")
DESTINATION = re.compile(r"^[\w%$#.@\[\]:<> ]+=\s*(?!=)")

# Mnemonics (base, case-sensitive as drivers print them) worth naming in the report, by what they say.
KEY_GROUPS = [
    ("tensor-core MMA, Hopper warpgroup", ["HGMMA", "wgmma", "WGMMA"]),
    ("tensor-core MMA, warp (mma.sync class)", ["HMMA", "IMMA", "BMMA", "DMMA", "mma"]),
    ("cooperative matrix (SPIR-V)", ["OpCooperativeMatrixMulAddNV", "OpCooperativeMatrixMulAddKHR",
                                     "OpCooperativeMatrixLoadNV", "OpCooperativeMatrixLoadKHR",
                                     "OpCooperativeMatrixStoreNV", "OpCooperativeMatrixStoreKHR"]),
    ("shared-memory loads", ["LDS", "LDSM", "ldmatrix"]),
    ("shared-memory stores", ["STS"]),
    ("global loads", ["LDG", "LDGSTS", "LD", "ld", "LDGDEPBAR", "UTMALDG", "UBLKCP"]),
    ("global stores", ["STG", "ST", "st"]),
    ("barriers", ["BAR", "BARRIER", "WARPSYNC", "bar", "barrier", "OpControlBarrier", "OpMemoryBarrier"]),
    ("fp32 FMA", ["FFMA", "fma", "ffma", "OpFMul", "OpFAdd"]),
    ("fp16 FMA", ["HFMA2", "HADD2", "HMUL2"]),
    ("register spills (local memory)", ["LDL", "STL"]),
]


def instruction(line):
    """The mnemonic of an instruction-looking line, or None."""
    s = BLOCK_COMMENT.sub(" ", line)
    for mark in (";", "//"):
        i = s.find(mark)
        if i >= 0:
            s = s[:i]
    s = s.strip().lstrip("{}").strip()
    if not s or s.startswith(("#", ".")) or s.endswith((":", "{")):  # labels, directives, block openers
        return None
    s = PREDICATE.sub("", s)
    m = DESTINATION.match(s)
    if m and "(" not in s[: m.end()]:
        s = s[m.end():]
    words = s.split()
    if len(words) > 1 and words[0] == "intrinsic":  # older NIR: "intrinsic store_ssbo (ssa_1, ...)"
        words = words[1:]
    tok = words[0].rstrip(",").lstrip("@") if words else ""
    return tok if MNEMONIC.match(tok) else None


def sections(text, name):
    """[(title, [lines])]: pipeline_stats sections, or the whole text as one."""
    out, title, lines = [], None, []
    for line in text.splitlines():
        m = SECTION.match(line)
        if m:
            if title is not None:
                out.append((title, lines))
            title, lines = m.group(1), []
        else:
            lines.append(line)
    if title is None:
        return [(name, lines)]
    out.append((title, lines))
    return out


def mix(lines):
    full, base = collections.Counter(), collections.Counter()
    for line in lines:
        tok = instruction(line)
        if tok:
            full[tok] += 1
            base[tok.split(".")[0]] += 1
    return full, base


def key_counts(base):
    return {group: {m: base[m] for m in names if base[m]} for group, names in KEY_GROUPS}


def verdict(base):
    if any(base[m] for m in ("HGMMA", "wgmma", "WGMMA")):
        return "Hopper warpgroup MMA (HGMMA/wgmma) present"
    if any(base[m] for m in ("HMMA", "mma")):
        return "warp-level MMA only (HMMA / mma.sync class), no HGMMA"
    return "no tensor-core MMA instruction in this text"


def disassemble_binary(path):
    """Text of a binary representation pipeline_stats wrote (.bin): an ELF (a cubin, on NVIDIA) goes through
    nvdisasm or cuobjdump -sass when one is on PATH; None otherwise (the caller says why)."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return None, "not an ELF file"
    for tool in (["nvdisasm", "-c", path], ["cuobjdump", "-sass", path]):
        if shutil.which(tool[0]):
            r = subprocess.run(tool, capture_output=True, text=True, check=False)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout, tool[0]
    return None, "an ELF file that no nvdisasm or cuobjdump on PATH disassembled"


def files(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                for n in sorted(names):
                    if n.endswith((".txt", ".sass", ".ptx", ".nir", ".ll", ".spvasm", ".asm", ".bin")):
                        yield os.path.join(root, n)
        else:
            yield p


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--all-sections", action="store_true", help="also count `executable` (statistics) sections")
    a = ap.parse_args(argv)
    report, notes = [], []
    for path in sorted(set(files(a.paths))):
        if path.endswith(".bin"):
            text, how = disassemble_binary(path)
            if text is None:
                notes.append(f"{path}: binary representation, {how}")
                continue
            full, base = mix(text.splitlines())
            if full:
                report.append({"file": path, "section": "disassembled by " + how, "instructions": sum(full.values()),
                               "distinct": len(full), "verdict": verdict(base), "key": key_counts(base),
                               "top": full.most_common(a.top), "base": dict(base.most_common())})
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for title, lines in sections(text, os.path.basename(path)):
            if title.startswith("executable") and not a.all_sections:
                continue
            full, base = mix(lines)
            if not full:
                continue
            report.append({"file": path, "section": title, "instructions": sum(full.values()),
                           "distinct": len(full), "verdict": verdict(base), "key": key_counts(base),
                           "top": full.most_common(a.top), "base": dict(base.most_common())})
    for n in notes:
        print("isa_mix: " + n, file=sys.stderr)
    if not report:
        print("isa_mix: no instruction-looking lines in " + " ".join(a.paths), file=sys.stderr)
        return 1
    if a.json:
        json.dump({"sections": report, "notes": notes}, sys.stdout, indent=1)
        print()
        return 0
    for r in report:
        print(f"{r['file']} [{r['section']}]: {r['instructions']} instructions, {r['distinct']} distinct; {r['verdict']}")
        for group, counts in r["key"].items():
            if counts:
                share = 100.0 * sum(counts.values()) / r["instructions"]
                print(f"  {group:40s} {share:5.1f}%  " + " ".join(f"{m}={n}" for m, n in counts.items()))
        print("  top: " + " ".join(f"{m}={n}" for m, n in r["top"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
