#pragma once
// The matmul kernel family: C[b] = epilogue(op(A[b]) · op(B[b])), chosen by shape and DeviceCaps.
//
// Tiers (MatmulTier), each in kernels/matmul/<tier>.cpp with its shader files (*.comp, *.glsl beside it):
//   Gemv        (gemv.cpp) M <= 8: one pass over B, K split across a 256-thread workgroup and reduced in
//               shared memory (bandwidth-bound; the inference and small-batch case).
//   Scalar      (scalar.cpp) f32 FMA in three tiles: 128x128 (8x8 per thread, BK 8) and 64x64 (4x4 per
//               thread, BK 32), both double-buffered shared memory with register prefetch, and 16x16 (one
//               output per thread, for outputs too small to spread over the GPU otherwise). Runs everywhere;
//               the lavapipe path.
//   CoopMatNV   (coopmat.cpp) GL_NV_cooperative_matrix, f16 inputs, f32 accumulation: 256 threads (8
//   subgroups
//               of 32, each a 64x32 patch of 16x8 accumulators), 128x128 block tile, BK 32, 16-byte global
//               loads into registers (prefetch of the next K tile), double-buffered shared memory with padded
//               rows.
//   CoopMatKHR  the same GLSL, compiled to NV SPIR-V, validated, then rewritten to SPV_KHR_cooperative_matrix
//               (shader/coopmat_khr.hpp).
// Every tier handles A·B, Aᵀ·B, A·Bᵀ (and Aᵀ·Bᵀ) by choosing the staging layout, any M, N, K (ragged edges
// are zero-filled on load and masked on store), leading dimensions, and a batch over gl_WorkGroupID.z.
//
// Split-K (MatmulVariant::split_k = S > 1, scalar and cooperative tiers): the pass runs S times as many
// workgroups, slice s multiplying K range [s·kc, (s+1)·kc) (kc = split_chunk) and storing its raw partial
// product into an f32 scratch buffer [S][batch][M][N]; then each workgroup takes a ticket of its tile (an
// atomic counter in a buffer of zeros), and the one that takes the last sums the tile's S slices of each
// output in slice order (deterministic) and applies the epilogue, putting the counter back to zero
// (split.glsl). One dispatch, no barrier: the summing pass this replaced cost a dispatch and a barrier per
// split product (~300 a SmolLM2 training step). choose_variant states when splitting pays.
//
// Use from codegen: select_matmul() returns everything needed to build and dispatch the kernel without
// touching a device; build_matmul_kernel() compiles the pass (the KHR rewrite included); record_matmul()
// records it. The epilogue hook is a GLSL expression applied to each output before it is stored.
//
// Buffers (set 0) of a one-pass kernel: binding 0 = A, 1 = B (element type MatmulShape::input: f32, or f16
// where the device has 16-bit storage; the cooperative tiers need f16), 2 = C (f32, row-major M x N with
// leading dimension ldc), 3.. = the epilogue's extra f32 buffers e0, e1, ... Split-K adds two after those:
// the partial products (MatmulKernel::scratch_bytes) and the tickets (ticket_bytes, zero before the first
// dispatch; each dispatch leaves them zero). Push constants: MatmulPush (36 bytes).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "meganeura/config/config.hpp"
#include "meganeura/runtime/device.hpp"
#include "meganeura/shader/shader.hpp"

namespace meganeura::kernels {

using meganeura::MatmulTier;  // config/config.hpp, with tier_name and parse_tier
using meganeura::parse_tier;
using meganeura::tier_name;
// F32: f32 storage and arithmetic. F16: f16 storage (needs 16-bit storage). F32RoundF16: f32 storage, each
// element rounded to f16 as it is loaded (SessionConfig::precision Mixed16: no f16 buffers, runs everywhere).
// Accumulation is f32 in every case.
enum class MatmulInput : uint8_t { F32, F16, F32RoundF16 };
// How one operand's elements are read, on top of MatmulInput (scalar and GEMV tiers): Plain is the input's
// element type; F16 and BF16 are 16-bit storage widened to f32 as loaded (an f16 or bf16 weight times an f32
// activation; needs 16-bit storage), then treated as MatmulInput says. Q4_0 .. Q6_K are GGUF blocks
// (quant/blocks.hpp) read as 32-bit words and dequantized as loaded (quant/glsl.hpp), never expanded in
// memory: the operand's stored rows must be whole blocks (its contiguous extent and leading dimension
// multiples of the block). The GEMV tier reads a transposed B (a weight [N, K] quantized along K: x·Wᵀ) eight
// values of a block at a time; every other access (scalar tiles, an untransposed or A operand) dequantizes
// element by element. The cooperative tiers take no loads: choose_tier sends such products to the scalar
// tier.
enum class MatmulLoad : uint8_t { Plain, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K };
bool is_block_load(MatmulLoad l);         // Q4_0 .. Q6_K
uint32_t load_block_elems(MatmulLoad l);  // 1 for Plain, F16, BF16
const char* load_name(MatmulLoad l);      // "plain", "f16", "bf16", "q4_0", ..
// Elements of each operand counted as stored values; an operand of a block load occupies
// elements / block_elems × block_bytes bytes (operand_bytes).
uint64_t operand_bytes(MatmulLoad l, MatmulInput input, uint64_t elements);

struct MatmulShape {
  uint32_t m = 0, n = 0, k = 0;
  uint32_t batch = 1;
  bool trans_a = false;  // A stored K x M (else M x K), row-major
  bool trans_b = false;  // B stored N x K (else K x N), row-major
  MatmulInput input = MatmulInput::F32;
  MatmulLoad load_a = MatmulLoad::Plain, load_b = MatmulLoad::Plain;
  // Leading dimensions and batch strides in elements; 0 means packed.
  uint32_t lda = 0, ldb = 0, ldc = 0;
  uint32_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Applied to each output element before it is stored. `expr` is a GLSL float expression of
//   v (the f32 accumulator), row, col, batch (uint) and e0[], e1[], ... (the extra f32 buffers);
// e.g. bias then ReLU: {"max(v + e0[col], 0.0)", 1}. Empty: store v.
// The code generator also passes `buffer_decls` (its own declarations of bindings 3.., replacing e0[] ..),
// `decls` (functions `expr` calls), `operand_decls` (for the pass that reads A and B: may `#define A_FILL` /
// `B_FILL`, or `#define CUSTOM_BATCH_BASE 1` and define `uint a_base(uint batch)` and `uint b_base(uint
// batch)`, element offsets of each operand's matrix, for broadcast batch dimensions) and `c_type` (the GLSL
// element type of C: float, int or uint; direct cooperative stores need float). `store`, when set, names a
// function `void store(uint i, float v)` (in `decls`) called instead of `c[i] = v` with each element, once,
// by one thread (a split product's last slice sums each once): a fused parameter update, with C bound to the
// parameter.
struct MatmulEpilogue {
  std::string expr;
  uint32_t extra_buffers = 0;
  std::string buffer_decls;
  std::string decls;
  std::string operand_decls;
  std::string c_type = "float";
  std::string store;
  // GEMV with B transposed only: further products of the same A, each over its own weight (the load and K of
  // B, `n` rows), computed in the same pass over A (glsl::gemv_multi). Product j's weight is the next binding
  // from 3 on, followed by its output (f32, [M, n]) when `stored`; an unstored product's value is in the
  // global `mm_extra<j>` (declared in decls) when epilogue() runs for the same row and column. Epilogue
  // buffers follow (buffer_decls / extra_buffers count these bindings too); the grid covers the widest
  // product.
  struct GemvProduct {
    uint32_t n = 0;
    bool stored = false;
  };
  std::vector<GemvProduct> products;
};

// Block tile of the cooperative tiers: BM x BN outputs per workgroup of warps_m x warps_n subgroups (4, 8 or
// 16 subgroups of 32: 128, 256 or 512 invocations), BK deep per shared-memory stage. Each subgroup's patch
// must be a multiple of 16 x 8; both shared tiles (`stages` of them, 16-byte row padding) plus 512 bytes a
// subgroup for the edge epilogue must fit the device.
//   group   0: workgroups take tiles in launch order (columns fastest); g > 0: g tile-rows walked column by
//           column (a grouped raster, so that workgroups resident together share B columns in L2).
//   stages  2: double-buffered shared tiles, one barrier per K tile; 1: one shared stage, two barriers per K
//           tile (half the shared memory, so BK can double).
//   depth   two stages: global loads run `depth` K tiles ahead of the multiply-adds (1..3), through as many
//           register sets; one stage takes 1.
//   workgroup  ("/w") the whole workgroup owns one BM x BN accumulator of workgroup-scope matrices
//           (VK_NV_cooperative_matrix2 through the KHR rewrite) and multiplies the staged BM x BK and BK x BN
//           tiles with one instruction each; warps_m x warps_n only sets the invocations. The driver lays out
//           the fragments. KHR tier only, a flexible shape of the device for that many invocations, stored
//           straight to C: no epilogue, M and N multiples of the tile.
struct CoopMatTile {
  uint32_t bm = 128, bn = 128, bk = 32, warps_m = 2, warps_n = 4;
  uint32_t group = 0, stages = 2, depth = 1;
  bool workgroup = false;
  uint32_t threads() const { return 32 * warps_m * warps_n; }
  std::string to_string() const;  // "128x128x32/2x4", then "/g8", "/s1", "/d2", "/w" where not the defaults
  static CoopMatTile parse(const std::string& s);  // inverse of to_string; throws ConfigError
  bool operator==(const CoopMatTile&) const = default;
};

// The tile a cooperative matmul gets unless a tuned variant names one: 128x256x32/4x4/g4/s1 (16 subgroups of
// 32 x 64) for large products in every layout (at least 256 such tiles), else the default 128x128x32/2x4
// (small outputs need the workgroups). The caps overload below also takes 64x64x32/2x2 (4 subgroups) where
// 128x128 tiles, split as choose_variant would (at most max_fill_split(K) slices), keep less than half the
// device busy (M = 128 against N = 576: 5 tiles). Why these: docs/performance.md.
CoopMatTile default_coopmat_tile(const MatmulShape& shape);
// The same with the device, tier and epilogue in view: on the coopmat-khr tier of a device with
// workgroup-scope matrices (VK_NV_cooperative_matrix2), a large product of f16 buffers with M and N multiples
// of 128, no epilogue and a 16-byte aligned C takes 128x128x32/2x2/s1/w if it is A·Bᵀ, or if K is a multiple
// of 32 with 16-byte aligned rows (the tile's loads then go unguarded; guarded A·B and Aᵀ·B are faster on the
// subgroup tile, and so are f32 buffers rounded on load). What sessions and bench_matmul use.
CoopMatTile default_coopmat_tile(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier,
                                 const MatmulEpilogue& epilogue = {});

struct MatmulPush {  // the push-constant block, in this order; all in elements
  uint32_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
};

// One point of the matmul kernel search space. choose_variant() is the default; codegen takes the tuner's
// KernelVariant knobs (tier, tile, split: codegen/variant.hpp) over it.
struct MatmulVariant {
  MatmulTier tier = MatmulTier::Scalar;
  uint32_t tile = 0;     // Scalar: the output tile's edge, 128, 64 or 16; 0 for the other tiers
  uint32_t split_k = 1;  // slices of K: S > 1 partial products into scratch, summed by each tile's last slice
  CoopMatTile coop;      // cooperative tiers only
  // "scalar.64", "scalar.16.k9", "gemv", "coopmat-nv.128x128x32/2x4.k2": tier, tile, then k<S> when S > 1.
  std::string to_string() const;
  static MatmulVariant parse(const std::string& s);  // inverse of to_string; throws ConfigError
  bool operator==(const MatmulVariant&) const = default;
};

// The choice rule, for a tier (choose_tier's):
//   tile    Scalar: the largest of 128 and 64 whose output grid (tiles x batch) fills the device, i.e. has at
//           least target_workgroups(caps) workgroups, unsplit. Else the largest of them that fits inside the
//           output (edge <= M and <= N) and, with K split (at most max_fill_split(K) slices), keeps at least
//           half the device busy — but the 64 tile, where it qualifies too, when the 128 one's slices would
//           be shorter than 2 x kMinSliceK (split_fixup's sum of a 128x128 tile outweighs such slices).
//           Else 16. Cooperative: `coop` as given (default_coopmat_tile).
//   split   when the grid is still below the target and K >= kMinSplitK: S = ceil(target / grid) for the
//           scalar tier, floor(target / grid) for the cooperative ones (no second wave of slices), at most
//           K / kMinSliceK (and max_fill_split(K) for a 128 or 64 tile chosen by its split, and in the
//           cooperative tile's choice), normalised so that no slice is empty (split_count). Shorter K is not
//           worth the partial products' round trip (it costs as much as a 128-deep K loop). Gemv never
//           splits.
// Why the 16 tile comes last: its workgroup does a sixteenth of a 64 tile's multiply-adds per K step, and a K
// step costs a global-load latency either way; at M = 128 the 16 tile's K loop (K / 16 dependent steps) was
// the step's largest family on the H200 (docs/performance.md, issue 29). So a 32x128x784 layer on 132 SMs
// takes scalar.16.k9 (144 workgroups), 128x576x576 scalar.64.k6 (108), 128x1536x576 scalar.64.k3 (144),
// 1024^3 scalar.64 (256) and 4096^3 scalar.128 (1024).
constexpr uint32_t kMinSliceK = 64, kMinSplitK = 256;
// More slices than this multiply the partial products (S x M x N floats written and read back) while each
// slice's K loop is already a few tiles long; except that slices of kLongSliceK and more are always allowed
// (max_fill_split): the head's input gradient 128x576x49152 ran scalar.64.k8 in 0.487 ms against
// scalar.128.k64 in 0.342 (f32) and 64x64.k8 in 0.434 against 128x128.k64 in 0.213 (f16; H100), its partial
// products (8 MB at 27 slices) a tenth of the weight it reads.
constexpr uint32_t kMaxFillSplit = 8, kLongSliceK = 768;
uint32_t max_fill_split(uint32_t k);  // max(kMaxFillSplit, k / kLongSliceK)
uint32_t target_workgroups(
    const runtime::DeviceCaps& caps);  // caps.compute_units (one 256-thread group each)
MatmulVariant choose_variant(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier,
                             const CoopMatTile& coop = {});
// The rule's split_k for `v`'s tier and tile (1 when its grid fills the device or K is short).
uint32_t choose_split(const runtime::DeviceCaps& caps, const MatmulShape& shape, const MatmulVariant& v);
// Every variant of `shape` worth timing: each tier that can run it (cooperative ones only when `best` is
// one), each scalar tile, split_k in 1, 2, 4, ... while slices keep kMinSliceK of K. choose_variant's pick is
// first.
std::vector<MatmulVariant> matmul_candidates(const runtime::DeviceCaps& caps, const MatmulShape& shape,
                                             MatmulTier best);
// K per slice for S requested slices (a multiple of 32, so every tile depth and 16-byte load divides it), and
// the number of non-empty slices that gives.
uint32_t split_chunk(uint32_t k, uint32_t split_k);
uint32_t split_count(uint32_t k, uint32_t split_k);

// One dispatch of a matmul kernel.
struct MatmulPass {
  shader::ShaderSource source;           // GLSL + defines; the cooperative tiers are written against NV
  bool rewrite_to_khr = false;           // CoopMatKHR: compile, validate, then rewrite the SPIR-V
  std::vector<uint32_t> spec_constants;  // empty: tile sizes size shared arrays and unrolled loops, so they
                                         // are defines (part of the shader cache key)
  uint32_t num_buffers = 3;              // A, B, C, then the epilogue's (see the binding list above)
  uint32_t push_constant_bytes = sizeof(MatmulPush);
  MatmulPush push{};
  uint32_t grid[3] = {1, 1, 1};         // workgroups: x over N (or M,N tiles), y over M, z over the batch
  uint32_t local_size = 256;            // invocations per workgroup (cooperative tiles: CoopMatTile::threads)
  uint32_t required_subgroup_size = 0;  // 0: the driver's
};

struct MatmulKernel {
  MatmulTier tier = MatmulTier::Scalar;
  MatmulVariant variant;
  MatmulPass pass;
  uint64_t scratch_bytes = 0;  // split_k > 1: f32 partial products, split_k x batch x M x N
  uint64_t ticket_bytes = 0;   // split_k > 1: a uint32 counter per output tile and batch
};

// Whether `tier` can run `shape` on this device ("" when it can, else the reason).
std::string tier_unavailable(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier);

// The kernel for `shape` as `variant` says. Throws ShapeError for an empty or overflowing shape, ConfigError
// when the tier cannot run it (tier_unavailable's reason) or the variant is not one of the family's.
MatmulKernel select_matmul(const runtime::DeviceCaps& caps, const MatmulShape& shape,
                           const MatmulVariant& variant, const MatmulEpilogue& epilogue = {});
// The same with choose_variant(caps, shape, tier, tile) as the variant.
MatmulKernel select_matmul(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier tier,
                           const MatmulEpilogue& epilogue = {}, const CoopMatTile& tile = {});

// The tier a shape gets when `best` is the best tier that passed the self-test: GEMV for M <= 8, the
// cooperative tier for f16 inputs when `best` is one, else scalar. f32 buffers rounded on load (Mixed16) take
// the cooperative tier only from kMinCoopRoundedMacs multiply-adds on: below, the scalar tier (which rounds
// the same way) is faster.
constexpr uint64_t kMinCoopRoundedMacs = uint64_t(1) << 25;  // the measured crossover, between 256³ and 384³
MatmulTier choose_tier(const runtime::DeviceCaps& caps, const MatmulShape& shape, MatmulTier best);

// Mixed16 products of at least kMinF16CopyMacs multiply-adds (and no split) first copy both operands to f16,
// once, into the kernel's scratch, and multiply those (f16 buffers: the tiles of f16 inputs, half the bytes
// loaded, no rounding in the inner loop); smaller ones round on load.
constexpr uint64_t kMinF16CopyMacs = uint64_t(1) << 30;  // where an O(MK + KN) copy is small against O(MNK)
// Mixed16 products of an f32 A and a B of 16-bit or block-quantized storage (an f16, bf16 or GGUF weight:
// MatmulLoad) take the same copy from kMinStagedLoadMacs on, B converted to f16 on the way (dequantized for
// blocks): the cooperative tiers take no loads, so without it a prefill over such weights ran the scalar
// tier (f16 prefill of SmolLM2 at batch 16: 1.20× the compiled torch f16 run on the H200). The copy of B is a
// temporary of the kernel's scratch, rewritten every step; the weight stays in its storage type.
// Only from kMinStagedRows rows of A on: the copy reads and writes all of B every step, which a decode step's
// few rows (the 49152-wide tied head at batch 16: 57 MB written a token) would not win back.
constexpr uint64_t kMinStagedLoadMacs = uint64_t(1) << 27;
constexpr uint32_t kMinStagedRows = 64;
// The copy's pass: A's `na` values rounded to f16 (ties to even, as Mixed16 rounds on load) into halves
// [0, na) of binding 2, B's `nb` into [b_offset, b_offset + nb) (b_offset a multiple of 8, at least na); A
// is binding 0 (f32), B binding 1 (f32, or `load_b`'s storage). No push constants. Throws ShapeError for a
// bad offset.
MatmulPass f16_copy_pass(const runtime::DeviceCaps& caps, uint64_t na, uint64_t nb, uint64_t b_offset,
                         MatmulLoad load_b = MatmulLoad::Plain);

// Compiles one pass (cached per options), validates the NV module, rewrites to KHR where asked.
runtime::KernelDesc build_matmul_kernel(const MatmulPass& pass, const shader::CompileOptions& options);

// Records the kernel's dispatch (id from build_matmul_kernel). `extra` holds the epilogue's buffers. With
// split_k > 1 `split` must hold the partial products (at least scratch_bytes) and the tickets (at least
// ticket_bytes, all zero: the caller zeroes them once, every dispatch leaves them so; concurrent dispatches
// need tickets of their own).
struct SplitBuffers {
  runtime::Buffer partials, tickets;
};
void record_matmul(runtime::CommandList& list, runtime::KernelId id, const MatmulKernel& kernel,
                   const runtime::Buffer& a, const runtime::Buffer& b, const runtime::Buffer& c,
                   std::span<const runtime::Buffer> extra = {}, const SplitBuffers& split = {});

// CPU reference with double accumulation over the given (already f16-rounded, for f16) values; no epilogue.
// a, b, c laid out as the shape says.
void matmul_reference(const MatmulShape& shape, const float* a, const float* b, float* c);

// Elements of each operand's storage (batch strides and leading dimensions included).
uint64_t elements_a(const MatmulShape& s);
uint64_t elements_b(const MatmulShape& s);
uint64_t elements_c(const MatmulShape& s);

// Start-up self-test.
struct TierProbe {
  MatmulTier tier;
  bool ok = false;
  std::string detail;  // why it failed, or the worst error seen
};
struct MatmulTierChoice {
  MatmulTier best = MatmulTier::Scalar;  // the best tier that passed (scalar if all failed)
  std::vector<TierProbe> probes;
  std::string to_text() const;
};
// Runs each cooperative tier the device offers (only `forced` when given) on small aligned and ragged
// problems in every transpose against matmul_reference; the best one that passes is chosen. A tier that is
// unavailable or wrong is recorded with the reason and the choice falls back to scalar (itself probed).
// `forced`: SessionConfig::matmul_tier (nullopt: every cooperative tier the device offers).
MatmulTierChoice probe_matmul_tiers(runtime::Device& device, const shader::CompileOptions& options,
                                    std::optional<MatmulTier> forced = std::nullopt);

// f32 <-> IEEE binary16 (round to nearest even), for f16 operands.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

}  // namespace meganeura::kernels
