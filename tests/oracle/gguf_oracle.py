#!/usr/bin/env python3
"""PyPI gguf (scripts/requirements-oracle.txt) as the oracle for meganeura's GGUF reader, writer and quants.

  gguf_oracle.py quants DIR          for DIR/<label>.<TYPE>.blocks write <label>.<TYPE>.f32 (gguf.quants.dequantize);
                                     for DIR/<label>.<TYPE>.values (f32) write <label>.<TYPE>.quant where
                                     gguf.quants.quantize implements TYPE
  gguf_oracle.py read FILE OUT [meta] GGUFReader: OUT.json (metadata, tensor infos) and OUT.bin (per tensor its raw
                                     bytes, then its dequantized f32 values; offsets in the JSON; none with "meta")
  gguf_oracle.py write SPEC OUT      GGUFWriter from SPEC (JSON; tensor bytes in SPEC's "data_file")
  gguf_oracle.py stream FILE         per tensor on stdout: "<name>\\n<count>\\n" then count f32 (dequantized)

Floats in metadata travel as their bit patterns and strings as hex, so comparisons are exact.
"""
import json
import os
import struct
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType, GGUFValueType
from gguf import quants

SCALAR_FMT = {
    GGUFValueType.UINT8: "<B", GGUFValueType.INT8: "<b", GGUFValueType.UINT16: "<H", GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I", GGUFValueType.INT32: "<i", GGUFValueType.FLOAT32: "<f", GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q", GGUFValueType.INT64: "<q", GGUFValueType.FLOAT64: "<d",
}
FLOAT_BITS = {GGUFValueType.FLOAT32: np.uint32, GGUFValueType.FLOAT64: np.uint64}


def cmd_quants(d):
    for name in sorted(os.listdir(d)):
        label, _, ext = name.rpartition(".")
        if ext not in ("blocks", "values"):
            continue
        qtype = GGMLQuantizationType[label.rpartition(".")[2]]
        path = os.path.join(d, name)
        if ext == "blocks":
            raw = np.fromfile(path, dtype=np.uint8)
            quants.dequantize(raw, qtype).astype(np.float32).tofile(os.path.join(d, label + ".f32"))
        elif ext == "values":
            x = np.fromfile(path, dtype=np.float32)
            try:
                q = quants.quantize(x, qtype)
            except NotImplementedError:
                continue
            np.ascontiguousarray(q).view(np.uint8).tofile(os.path.join(d, label + ".quant"))


def scalar_json(vtype, arr):
    """One scalar from a numpy part: floats as bit patterns, bools as 0/1, integers as integers."""
    if vtype in FLOAT_BITS:
        return int(arr.view(FLOAT_BITS[vtype])[0])
    return int(arr[0])


def decode(parts, i, vtype):
    """Rebuilds a value from GGUFReader's flat parts (it flattens arrays of arrays); returns (json, next i)."""
    if vtype == GGUFValueType.STRING:
        return {"type": int(vtype), "hex": bytes(parts[i + 1]).hex()}, i + 2
    if vtype == GGUFValueType.ARRAY:
        etype = GGUFValueType(int(parts[i][0]))
        count = int(parts[i + 1][0])
        i += 2
        items = []
        for _ in range(count):
            item, i = decode(parts, i, etype)
            items.append(item)
        return {"type": int(vtype), "elem": int(etype), "items": items}, i
    return {"type": int(vtype), "v": scalar_json(vtype, parts[i])}, i + 1


def cmd_read(path, out, what="all"):
    r = GGUFReader(path)
    with_data = what != "meta"
    doc = {"version": int(r.fields["GGUF.version"].parts[0][0]), "alignment": int(r.alignment),
           "data_offset": int(r.data_offset), "metadata": [], "tensors": []}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        vtype = GGUFValueType(int(f.parts[2][0]))
        value, end = decode(f.parts, 3, vtype)
        assert end == len(f.parts), key
        doc["metadata"].append({"key": key, "value": value})
    with open(out + ".bin", "wb") as blob:
        for t in r.tensors:
            if not with_data:
                doc["tensors"].append({"name": t.name, "type": int(t.tensor_type), "dims": [int(x) for x in t.shape],
                                       "elements": int(t.n_elements), "bytes": int(t.n_bytes),
                                       "offset": int(t.data_offset) - int(r.data_offset)})
                continue
            raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
            deq = quants.dequantize(raw, t.tensor_type).astype(np.float32).reshape(-1)
            entry = {"name": t.name, "type": int(t.tensor_type), "dims": [int(x) for x in t.shape],
                     "elements": int(t.n_elements), "bytes": int(t.n_bytes),
                     "offset": int(t.data_offset) - int(r.data_offset),
                     "raw_at": blob.tell(), "raw_len": int(raw.size)}
            blob.write(raw.tobytes())
            entry["f32_at"] = blob.tell()
            entry["f32_len"] = int(deq.size)
            blob.write(deq.tobytes())
            doc["tensors"].append(entry)
    with open(out + ".json", "w") as f:
        json.dump(doc, f)


def encode(spec):
    """Python value for GGUFWriter from the spec's JSON form of a value (the inverse of decode)."""
    vtype = GGUFValueType(spec["type"])
    if vtype == GGUFValueType.STRING:
        return bytes.fromhex(spec["hex"])
    if vtype == GGUFValueType.ARRAY:
        return [encode(item) for item in spec["items"]]
    if vtype in FLOAT_BITS:
        width = 4 if vtype == GGUFValueType.FLOAT32 else 8
        return struct.unpack(SCALAR_FMT[vtype], int(spec["v"]).to_bytes(width, "little"))[0]
    if vtype == GGUFValueType.BOOL:
        return bool(spec["v"])
    return int(spec["v"])


def cmd_write(spec_path, out):
    spec = json.load(open(spec_path))
    w = GGUFWriter(out, spec["arch"])
    if "alignment" in spec:
        w.add_custom_alignment(spec["alignment"])
    for kv in spec["metadata"]:
        v = kv["value"]
        sub = GGUFValueType(v["elem"]) if v["type"] == GGUFValueType.ARRAY else None
        w.add_key_value(kv["key"], encode(v), GGUFValueType(v["type"]), sub_type=sub)
    data = open(spec["data_file"], "rb").read() if spec["tensors"] else b""
    for t in spec["tensors"]:
        qtype = GGMLQuantizationType(t["type"])
        block, type_size = quants.GGML_QUANT_SIZES[qtype]
        dims = t["dims"]
        byte_shape = list(reversed(dims))
        byte_shape[-1] = dims[0] // block * type_size
        raw = np.frombuffer(data[t["at"]:t["at"] + t["len"]], dtype=np.uint8).reshape(byte_shape)
        w.add_tensor(t["name"], raw, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def cmd_stream(path):
    r = GGUFReader(path)
    out = sys.stdout.buffer
    for t in r.tensors:
        raw = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
        deq = quants.dequantize(raw, t.tensor_type).astype(np.float32).reshape(-1)
        out.write(f"{t.name}\n{deq.size}\n".encode())
        out.write(deq.tobytes())
    out.flush()


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"quants": cmd_quants, "read": cmd_read, "write": cmd_write, "stream": cmd_stream}[cmd](*args)
