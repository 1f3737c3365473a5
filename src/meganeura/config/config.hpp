#pragma once
// How a graph is compiled and run: SessionConfig and the enums it is made of. Low in the stage order
// (docs/architecture.md): every stage above it may read it; it depends on hub/ (HubConfig) and distributed/
// (DistributedConfig) only.
#include <cstdint>
#include <optional>
#include <string>

#include "meganeura/distributed/mpi.hpp"
#include "meganeura/hub/hub.hpp"

namespace meganeura {

enum class RewriteMode : uint8_t { Greedy, Saturate, Off };
// F32: f32 everywhere. Mixed16: f32 storage, matmul operands rounded to f16 on load (cooperative-matrix
// tiers), f32 accumulation. F16 / BF16: a storage policy for inference — loaders that honour it (the
// Generator's callers: load_hf's HfOptions::weight_dtype, the CLI) keep weights (and KV caches, F16) in
// 16 bits, and every kernel accumulates in f32; the session itself computes as F32. A training session
// refuses F16 / BF16 (its optimizer updates f32 parameters), as build() says with a ConfigError.
enum class Precision : uint8_t { F32, Mixed16, F16, BF16 };
// "f32" / "mixed16" / "f16" / "bf16" (any case) as on command lines (--precision) and in MEGANEURA_PRECISION;
// ConfigError naming `what` and the accepted words otherwise.
Precision parse_precision(const std::string& value, const std::string& what = "precision");
const char* precision_name(Precision p);
// Where parameters start when a session is built: the rule their layer recorded (Graph::set_init;
// Init::Default for a bare Graph::parameter), seeded by SessionConfig::seed unless the layer has its own
// seed; or zeros (a caller that uploads every weight itself, a loader, or a checkpoint restore, skips the
// work). Parameters bound to a session this one shares with keep that session's values.
enum class ParameterInit : uint8_t { Seeded, Zeros };
enum class OptimizerKind : uint8_t { None, Sgd, Adam, AdamW, LaProp };
// The matmul kernel families (kernels/matmul): GEMV for a handful of rows, the tiled scalar kernel, and the
// cooperative-matrix kernels through NVIDIA's or Khronos's extension.
enum class MatmulTier : uint8_t { Gemv, Scalar, CoopMatNV, CoopMatKHR };
const char* tier_name(MatmulTier t);  // "gemv", "scalar", "coopmat-nv", "coopmat-khr"
// Accepts tier_name()'s strings; ConfigError listing them otherwise.
MatmulTier parse_tier(const std::string& name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Sgd;
  double learning_rate = 0.01;
  double momentum = 0.0;  // SGD
  bool nesterov = false;  // SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  // Both run inside the recorded step. Clipping scales the (accumulated) gradients by
  // min(1, clip_grad_norm / (‖g‖₂ + 1e-6)) over all parameters together, as torch.nn.utils.clip_grad_norm_.
  // Accumulation: step() k-1 times only adds the gradients up; every k-th step() updates with their mean.
  double clip_grad_norm = 0.0;  // > 0: clip by global norm
  int grad_accumulation = 1;    // k micro-batches per update
};

// Everything that changes how a graph is compiled and run. from_env() is the only place in the library
// that reads environment variables.
struct SessionConfig {
  bool training = true;       // autodiff + optimizer update in the step
  OptimizerConfig optimizer;  // kind None: forward+backward only, no update, no moments
  RewriteMode rewrite = RewriteMode::Greedy;
  Precision precision = Precision::F32;  // MEGANEURA_PRECISION: f32, mixed16, f16 or bf16
  ParameterInit init = ParameterInit::Seeded;
  uint64_t seed = 0;                // MEGANEURA_SEED: parameter initialisation (ParameterInit::Seeded)
  bool alias_memory = true;         // liveness-based aliasing of intermediates
  bool host_visible = false;        // debug: every buffer host-readable
  bool keep_intermediates = false;  // debug: every node materialised and readable by name
  // Gradients stored and readable (read_gradient) in a training session with an optimizer. Off, an update
  // runs inside the kernel computing its gradient where it can (no clipping, no accumulation), and that
  // gradient is never stored.
  bool keep_gradients = false;
  std::optional<uint32_t> device_id;  // MEGANEURA_DEVICE_ID
  bool validation = false;            // MEGANEURA_VALIDATION
  std::string dump_plan;              // MEGANEURA_DUMP_PLAN: "" off, "-" or "1" stderr, else a path (from_env
                                      // reads 0/off/false/no as off and 1/on/true/yes as stderr)
  std::string cache_dir;              // MEGANEURA_CACHE_DIR, else $XDG_CACHE_HOME/meganeura; one that cannot
                                      // be created or written is a warning at build (the cache is off)
  // MEGANEURA_MATMUL (auto, scalar, coopmat-nv, coopmat-khr): the tier every large matmul takes; unset, the
  // start-up self-test picks the best one that passes.
  std::optional<MatmulTier> matmul_tier;
  bool gpu_timing = false;   // MEGANEURA_GPU_TIMING; also captures pipeline statistics (profile rows)
  bool pipeline_ir = false;  // also capture the driver's internal representations (slow; Session::pipelines)
  std::string trace_path;    // MEGANEURA_TRACE; a file that cannot be written is a ConfigError at build
  bool tune = false;         // MEGANEURA_TUNE: build() ends with Session::tune_with({}) (cached
                             // winners are not timed again, so only the first build pays)
  // Steps that may be queued on the GPU at once, each with its own staging for inputs and the learning rate
  // and its own readback of the outputs (docs/architecture.md, "frames in flight"). 1: every step() waits for
  // the one before it to finish. MEGANEURA_FRAMES_IN_FLIGHT.
  int frames_in_flight = 3;
  // Hugging Face hub downloads: HF_HOME, HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN (else the file $HF_HOME/token,
  // as huggingface_hub writes it), HF_HUB_OFFLINE.
  hf::HubConfig hub;
  // Data-parallel training over MPI (docs/distributed.md): one process per GPU, each on the device of its
  // local rank (MEGANEURA_DEVICE_ID still wins), gradients averaged across ranks inside step().
  // MEGANEURA_DISTRIBUTED=1 joins the job mpirun started; MEGANEURA_DIST_TIMEOUT (seconds) bounds every
  // collective.
  dist::DistributedConfig distributed;

  // A SessionConfig{} holds the defaults and never looks at the environment: only from_env() (and debug(),
  // which starts from it) reads MEGANEURA_* variables.
  static SessionConfig from_env();  // throws ConfigError naming the variable and accepted forms
  static SessionConfig debug();     // aliasing off, host-visible, intermediates kept
};

}  // namespace meganeura
