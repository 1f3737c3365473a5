"""The PyPI `safetensors` package (the reference implementation) as an oracle for our reader and writer.

  safetensors_oracle.py read FILE OUT.json   every tensor of FILE as the reference reads it
  safetensors_oracle.py write DIR            files written by the reference writer, and what they hold

Bytes travel as hex so that F16/BF16 bit patterns (NaN payloads, subnormals, -0) compare exactly.
"""
import json
import os
import sys

import numpy as np
import safetensors
import safetensors.numpy as stnp


def read(path, out):
    with open(path, "rb") as f:
        blob = f.read()
    doc = {"tensors": {}, "metadata": None}
    # The Rust core reads every dtype as raw bytes (numpy has no bfloat16) ...
    for name, t in safetensors.deserialize(blob):
        doc["tensors"][name] = {"dtype": t["dtype"], "shape": list(t["shape"]), "hex": bytes(t["data"]).hex()}
    # ... and the numpy API must agree with it wherever numpy has the dtype.
    with safetensors.safe_open(path, framework="np") as f:
        doc["metadata"] = f.metadata()
        for name in f.keys():
            if doc["tensors"][name]["dtype"] != "BF16":
                arr = f.get_tensor(name)
                doc["tensors"][name]["numpy_hex"] = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes().hex()
    with open(out, "w") as f:
        json.dump(doc, f)


def spec(dtype, shape, arr):
    return safetensors.TensorSpec(dtype=dtype, shape=list(shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)


def write(folder):
    rng = np.random.default_rng(23)
    os.makedirs(folder, exist_ok=True)
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    f32.flat[:6] = [np.nan, -0.0, np.inf, -np.inf, 1e-45, 3.4028235e38]
    # Every interesting 16-bit pattern class: random bits plus NaN payloads, infinities, subnormals, -0.
    special16 = [0x7E01, 0xFC00, 0x7C00, 0x0001, 0x83FF, 0x8000, 0x7FC1, 0xFF81, 0x0080, 0x007F]
    f16 = rng.integers(0, 1 << 16, size=(4, 7), dtype=np.uint16)
    f16.flat[: len(special16)] = special16
    bf16 = rng.integers(0, 1 << 16, size=(2, 3, 4), dtype=np.uint16)
    bf16.flat[: len(special16)] = special16
    i32 = rng.integers(-(1 << 31), 1 << 31, size=(6,), dtype=np.int32)
    u32 = rng.integers(0, 1 << 32, size=(2, 2), dtype=np.uint32)
    empty = np.zeros((0, 4), dtype=np.float32)
    scalar = np.array(2.5, dtype=np.float32)
    arrays = {  # name: (dtype, array holding the stored bits)
        "layers.0.weight": ("float32", f32), "layers.0.half": ("float16", f16.view(np.float16)),
        "layers.1.bf16": ("bfloat16", bf16), "ids": ("int32", i32), "counts": ("uint32", u32),
        "empty": ("float32", empty), "scalar": ("float32", scalar),
    }
    meta = {"format": "pt", "note": "written by safetensors " + safetensors.__version__}
    safetensors.serialize_file({k: spec(d, a.shape, a) for k, (d, a) in arrays.items()},
                               os.path.join(folder, "all_dtypes.safetensors"), metadata=meta)
    # The numpy API's writer too (no BF16 there).
    stnp.save_file({"w": f32, "h": f16.view(np.float16)}, os.path.join(folder, "numpy_api.safetensors"))
    # A dtype we do not map (I64): the file is valid, the tensor is not usable.
    stnp.save_file({"position_ids": np.arange(8, dtype=np.int64), "w": f32},
                   os.path.join(folder, "with_i64.safetensors"))
    # A two-shard checkpoint with its index, as transformers writes it.
    shards = {"model-00001-of-00002.safetensors": ["layers.0.weight", "layers.0.half", "ids"],
              "model-00002-of-00002.safetensors": ["layers.1.bf16", "counts", "scalar"]}
    sharded = os.path.join(folder, "sharded")
    os.makedirs(sharded, exist_ok=True)
    weight_map, total = {}, 0
    for shard, names in shards.items():
        safetensors.serialize_file({n: spec(arrays[n][0], arrays[n][1].shape, arrays[n][1]) for n in names},
                                   os.path.join(sharded, shard), metadata={"format": "pt"})
        for n in names:
            weight_map[n] = shard
            total += arrays[n][1].nbytes
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    expected = {k: {"dtype": {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "int32": "I32",
                              "uint32": "U32"}[d],
                    "shape": list(a.shape), "hex": a.tobytes().hex()} for k, (d, a) in arrays.items()}
    with open(os.path.join(folder, "expected.json"), "w") as f:
        json.dump({"tensors": expected, "metadata": meta}, f)


if __name__ == "__main__":
    if sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        sys.exit("usage: safetensors_oracle.py read FILE OUT.json | write DIR")
