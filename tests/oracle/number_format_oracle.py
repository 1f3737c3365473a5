"""The narrow number formats of ir/number_format.hpp as PyPI ml_dtypes (and onnx's reference cast) see them.

  number_format_oracle.py OUT.json

For every format: ml_dtypes' facts (finfo), the value of every code, and test inputs (every representable
value, the halfway points between neighbours and the f32 values next to them, overflow, tiny values, ±0, ±Inf,
±NaN, random f32 bit patterns) with the value each rule gives:
  - float8, float6, float4 without saturation: `x.astype(dtype)` (ml_dtypes rounds to nearest even; float4 and
    float6 saturate: they have no Inf or NaN; the float8 types overflow to Inf or NaN);
  - float8 with saturation: onnx.numpy_helper.saturate_cast (clip to ±max, then astype), as ONNX's reference
    Cast does;
  - E8M0: onnx.numpy_helper.to_float8e8m0 (ONNX's reference, round_mode up / down / nearest, saturate or not)
    for finite inputs whose f32 exponent field is normal (its rules read the f32 bits: for subnormal inputs
    they round by the exponent field, not the value), ml_dtypes' astype for nearest without saturation, and
    the special rows of ONNX's Cast table (0, NaN, Inf, beyond the largest and below the smallest value).
Values travel as f32 bit patterns so that signed zeros and NaN signs compare exactly.
"""
import json
import sys

import ml_dtypes
import numpy as np
import onnx.numpy_helper as nh

# The order of NumberFormat (ir/number_format.hpp).
FORMATS = [
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float4_e2m1fn",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
]
NEAREST_EVEN, UP, DOWN = 0, 1, 2


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32).tolist()


def f32(values):
    return np.array(values, dtype=np.float64).astype(np.float32)


def codes_of(dtype, nbits):
    return np.arange(1 << nbits, dtype=np.uint8).view(dtype)


def inputs_for(dtype, nbits, rng):
    decoded = codes_of(dtype, nbits).astype(np.float64)
    finite = np.unique(np.abs(decoded[np.isfinite(decoded)]))
    mx = float(finite.max())
    pos = finite[finite > 0]
    mids = (finite[:-1] + finite[1:]) / 2  # exact in f64; in f32 too (few significant bits)
    top_step = mx - float(finite[-2])
    xs = [decoded, mids, [mx + top_step / 2, mx + top_step, mx * 1.0625, 2 * mx, 1e6, 3.4028234663852886e38]]
    xs += [[float(pos.min()) / 2, float(pos.min()) * 0.75, float(pos.min()) / 4, 1e-7, 1e-30, 1e-40, 0.0]]
    x = f32(np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in xs]))
    near = np.concatenate([np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])
    x = np.concatenate([x, near])
    x = x[np.isfinite(x)]
    x = np.concatenate([x, -x, f32([np.inf, -np.inf])])
    nan = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFBFFFFF], dtype=np.uint32).view(np.float32)
    # random f32 values near the format's range (exponent within a few of its own), and anywhere
    lo, hi = np.log2(float(pos.min())) - 4, np.log2(mx) + 4
    e = rng.uniform(lo, hi, 3000)
    near_range = f32(np.exp2(e) * rng.choice([-1.0, 1.0], 3000))
    anywhere = rng.integers(0, 1 << 32, 1000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([x, nan, near_range, anywhere]).astype(np.float32)


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(25)
    doc = {"ml_dtypes": ml_dtypes.__version__, "formats": []}
    for index, name in enumerate(FORMATS):
        dtype = getattr(ml_dtypes, name)
        info = ml_dtypes.finfo(dtype)
        nbits = int(info.bits)
        entry = {
            "name": name,
            "index": index,
            "bits": nbits,
            "max": float(info.max),
            "smallest_subnormal": float(info.smallest_subnormal),
            "codes": bits(codes_of(dtype, nbits).astype(np.float32)),
            "cases": [],
        }
        with np.errstate(invalid="ignore", over="ignore"):
            x = inputs_for(dtype, nbits, rng)
            if name != "float8_e8m0fnu":
                entry["cases"].append(
                    {"saturate": 0, "rounding": NEAREST_EVEN, "x": bits(x), "want": bits(x.astype(dtype).astype(np.float32))}
                )
                entry["cases"].append(
                    {
                        "saturate": 1,
                        "rounding": NEAREST_EVEN,
                        "x": bits(x),
                        "want": bits(nh.saturate_cast(x, dtype).astype(np.float32)),
                    }
                )
            else:
                field = (x.view(np.uint32) >> 23) & 0xFF
                normal = x[(field > 0) & (field < 255)]
                for mode, rounding in (("up", UP), ("down", DOWN), ("nearest", NEAREST_EVEN)):
                    for saturate in (0, 1):
                        want = nh.to_float8e8m0(normal, bool(saturate), mode).astype(np.float32)
                        entry["cases"].append({"saturate": saturate, "rounding": rounding, "x": bits(normal), "want": bits(want)})
                positive = normal[normal > 0]
                entry["cases"].append(
                    {"saturate": 0, "rounding": NEAREST_EVEN, "x": bits(positive), "want": bits(positive.astype(dtype).astype(np.float32))}
                )
                # ONNX's Cast table for FLOAT8E8M0 (columns "saturate + up" and "non-saturate + nearest"), at
                # inputs where the rounded value and x are on the same side of the range's ends.
                e8_max, e8_min, nan = float(info.max), 2.0**-127, float("nan")
                special = [0.0, nan, np.inf, 2.0**127 * 1.5, 3.4e38, 1e-40]
                sat_up = [e8_min, nan, e8_max, e8_max, e8_max, e8_min]
                nonsat_nearest = [nan, nan, nan, nan, nan, nan]
                entry["cases"].append({"saturate": 1, "rounding": UP, "x": bits(f32(special)), "want": bits(f32(sat_up))})
                entry["cases"].append(
                    {"saturate": 0, "rounding": NEAREST_EVEN, "x": bits(f32(special)), "want": bits(f32(nonsat_nearest))}
                )
        doc["formats"].append(entry)
    with open(out, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()
