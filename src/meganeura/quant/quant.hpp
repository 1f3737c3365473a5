#pragma once
// CPU reference for the GGUF storage types (layouts and formulas in blocks.hpp): dequantizers, bit-exact
// against PyPI gguf's `gguf.quants`, and quantizers. For F16, BF16 and Q4_0 .. Q8_0 the quantizers make the
// same bytes as gguf-py (and ggml's reference); for the K types they are simple and correct rather than
// ggml's error-minimising search: each element is within half a (sub-block) step of its input.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "meganeura/quant/blocks.hpp"

namespace meganeura::quant {

// Bytes of `elements` values of type t. Throws ShapeError when elements is not a whole number of blocks.
size_t bytes_for(Type t, size_t elements);

// out.size() values from `bytes`, which must hold exactly bytes_for(t, out.size()) bytes (FormatError if
// not).
void dequantize(Type t, std::span<const uint8_t> bytes, std::span<float> out);
// Every value in `bytes` (a whole number of blocks, FormatError if not).
std::vector<float> dequantize(Type t, std::span<const uint8_t> bytes);

// Blocks of type t for `values` (a whole number of blocks, ShapeError if not).
std::vector<uint8_t> quantize(Type t, std::span<const float> values);

}  // namespace meganeura::quant
