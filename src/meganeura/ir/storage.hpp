#pragma once
// Values as the device stores them: f32, f16 and bf16 (IEEE binary16 and the upper half of binary32, both
// rounded to nearest even), i32 and u32. The host side of storage dtypes: sessions convert with these when
// values cross to and from the GPU, and the reference interpreter rounds 16-bit values with dtype_round, so
// that both sides mean the same number by a value of dtype f16.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "meganeura/ir/graph.hpp"
#include "meganeura/quant/blocks.hpp"

namespace meganeura {

// v rounded to the nearest value of dtype t (ties to even; beyond the largest finite value: infinity;
// integers: truncation, u32 modulo 2^32). F32 values pass unchanged (the reference holds them exactly in
// f64).
double dtype_round(double v, DType t);

// A reference value of an integer dtype as an int64_t, or nullopt where it is not one (NaN, ±Inf, a
// fraction, beyond ±2^63: reference i32 arithmetic is exact in f64 and may leave int64's range, and casting
// such a double is undefined behaviour in C++).
std::optional<int64_t> exact_int64(double v);
// The 32 bits an i32 value has on the device (two's complement, modulo 2^32); 0 for NaN and ±Inf.
uint32_t i32_bits(double v);

uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t h);

// The GGUF storage type of a float or block-quantized dtype (quant/blocks.hpp); ConfigError for i32/u32.
quant::Type quant_type(DType t);

// `values` as the bytes of dtype t (storage_bytes(t, values.size())); integers are taken as exact floats.
// Block-quantized dtypes are quantized on the host (quant::quantize: ggml's reference rounding for Q4_0 ..
// Q8_0, a simple nearest-step rounding for the K types), so `values` must be whole blocks (ShapeError).
std::vector<std::byte> to_storage(std::span<const float> values, DType t);
// The inverse, for `count` values of dtype t at `bytes` (block-quantized dtypes: dequantized).
std::vector<float> from_storage(const void* bytes, size_t count, DType t);

}  // namespace meganeura
