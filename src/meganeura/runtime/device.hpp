#pragma once
// The backend seam. Nothing here names a Vulkan type: the rest of the library sees buffers, kernels and
// recorded command lists by handle. Vulkan (runtime/vulkan_*.cpp) is the one implementation; a Metal
// backend would implement the same abstract classes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "meganeura/core/error.hpp"

namespace meganeura::runtime {

struct CoopMatShape {
  uint32_t m = 0, n = 0, k = 0;
  std::string a_type, b_type, c_type, result_type;  // "f16", "f32", "bf16", "s8", "s32", ...
  std::string scope;                                // "subgroup", ...
  uint32_t workgroup_invocations = 0;  // flexible shapes (VK_NV_cooperative_matrix2): m, n, k are
                                       // granularities for a workgroup of this many invocations
};

struct MemoryHeap {
  uint64_t size = 0;
  uint64_t budget = 0;  // VK_EXT_memory_budget where present, else size
  uint64_t usage = 0;
  bool device_local = false;
};

// What the device can do, filled once at start-up. Passed explicitly to every stage that needs it.
struct DeviceCaps {
  std::string backend = "vulkan";
  std::string name;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string device_type;  // "discrete", "integrated", "virtual", "cpu", "other"
  std::string driver_name, driver_info;
  uint32_t driver_version = 0;
  std::string api_version;  // "1.3.239"
  // limits
  uint32_t max_shared_memory = 0;
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint64_t max_storage_buffer_range = 0;
  uint32_t min_storage_buffer_offset_alignment = 0;
  uint32_t max_push_constants_size = 0;
  uint32_t subgroup_size = 0;
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
  // Streaming multiprocessors / compute units: VK_NV_shader_sm_builtins' shaderSMCount, else
  // VK_AMD_shader_core_properties' engines x arrays x CUs per array; 0 when the device does not say (matmul
  // tile and split choice then assume 64, kernels/matmul.hpp).
  uint32_t compute_units = 0;
  // features
  bool fp16_arithmetic = false;
  bool storage_16bit = false;
  bool int8_arithmetic = false;
  bool subgroup_basic = false, subgroup_arithmetic = false, subgroup_shuffle = false, subgroup_ballot = false;
  bool subgroup_size_control = false;
  bool buffer_device_address = false;
  bool vulkan_memory_model = false;
  bool timestamps = false;
  double timestamp_period_ns = 0.0;
  bool shader_float_atomic_add = false;
  bool pipeline_executable_info =
      false;  // VK_KHR_pipeline_executable_properties: Device::pipeline_executables
  // A shader may ask conversions to f16 to round to nearest even and keep f16 denormals
  // (VK_KHR_shader_float_controls: shaderRoundingModeRTEFloat16 and shaderDenormPreserveFloat16).
  bool f16_rte_conversion = false;
  // cooperative matrix
  bool coopmat_nv = false;
  bool coopmat_khr = false;
  std::vector<CoopMatShape> coopmat_nv_shapes, coopmat_khr_shapes;
  // VK_NV_cooperative_matrix2's workgroup-scope matrices of flexible size (enabled with coopmat_khr)
  bool coopmat2_workgroup = false;
  bool coopmat2_tensor_addressing = false;  // tensor loads (experiments/tensor_loads.hpp), with the above
  std::vector<CoopMatShape> coopmat2_flexible_shapes;
  std::vector<MemoryHeap> heaps;

  std::string to_json() const;   // machine-readable, one object
  std::string to_table() const;  // human-readable
  // Everything that can change generated code, without the heap usage that changes from run to run:
  // part of the shader cache key.
  std::string fingerprint() const;
};

// Every buffer the device's allocator hands out starts and ends on this boundary: 256 bytes (aligned for vec4
// and cooperative-matrix loads on any device we know), or the device's minStorageBufferOffsetAlignment where
// larger.
inline uint64_t buffer_alignment(const DeviceCaps& c) {
  return std::max<uint64_t>(256, c.min_storage_buffer_offset_alignment);
}
// The largest buffer that can be bound and allocated: maxStorageBufferRange down to buffer_alignment
// (NVIDIA's range is 2^32 - 1, so a buffer of the range rounded to 16 bytes was 2^32 once rounded up, past
// the range).
inline uint64_t bindable_bytes(const DeviceCaps& c) {
  return c.max_storage_buffer_range / buffer_alignment(c) * buffer_alignment(c);
}

struct DeviceOptions {
  std::optional<uint32_t> device_id;  // MEGANEURA_DEVICE_ID, parsed by SessionConfig::from_env
  // One process per GPU (distributed training: the local rank): the slot-th (mod count) of the devices that
  // device_id, or else the best device type, selects, in enumeration order.
  std::optional<uint32_t> slot;
  bool validation = false;    // MEGANEURA_VALIDATION
  bool host_visible = false;  // debugging: every buffer mappable
  uint64_t block_bytes = 0;   // sub-allocation block size; 0: 256 MiB capped by the device's limits
};

// A region of a device memory block. Buffers are sub-allocated from large blocks.
struct Buffer {
  uint32_t block = UINT32_MAX;
  uint64_t offset = 0;
  uint64_t size = 0;
  bool valid() const { return block != UINT32_MAX; }
};

// A view of bytes [offset, offset + size) of `b`, usable wherever a Buffer is (an arena carved up by a
// memory plan). Bound in a dispatch, its offset must be a multiple of
// caps.min_storage_buffer_offset_alignment. Only buffers returned by alloc() can be freed.
inline Buffer slice(const Buffer& b, uint64_t offset, uint64_t size) {
  if (offset > b.size || size > b.size - offset) {
    throw DeviceError("[runtime::slice] expected a range inside the buffer's " + std::to_string(b.size) +
                      " bytes, got offset " + std::to_string(offset) + " + " + std::to_string(size) +
                      " bytes");
  }
  return Buffer{b.block, b.offset + offset, size};
}

// What the driver says about a compiled kernel (VK_KHR_pipeline_executable_properties). Capturing costs
// pipeline-creation time, internal representations much more: only profiling tools ask for them.
enum class PipelineCapture : uint8_t {
  None,
  Statistics,
  Representations
};  // Representations: statistics too

struct PipelineStatistic {
  std::string name, description;
  std::string format;  // "bool32", "int64", "uint64", "float64": which of the values below is set
  bool b32 = false;
  int64_t i64 = 0;
  uint64_t u64 = 0;
  double f64 = 0.0;
};

struct PipelineRepresentation {
  std::string name, description;
  bool is_text = true;  // else `data` holds the driver's binary bytes
  std::string data;
};

// One executable of a pipeline (a compute pipeline usually has one).
struct PipelineExecutable {
  std::string name, description;
  uint32_t subgroup_size = 0;
  std::vector<PipelineStatistic> statistics;
  std::vector<PipelineRepresentation> representations;  // only with PipelineCapture::Representations
  uint32_t representations_offered = 0;                 // how many the driver has (NVIDIA's 580 driver: none)
};

struct KernelDesc {
  std::string label;  // provenance label, shown in errors, profiles and debug labels
  std::vector<uint32_t> spirv;
  uint32_t num_buffers = 0;  // storage buffers at set 0, bindings 0..n-1
  uint32_t push_constant_bytes = 0;
  std::vector<uint32_t> spec_constants;  // constant_id i = spec_constants[i] (32-bit each)
  uint32_t required_subgroup_size = 0;   // 0: the driver's choice; else needs caps.subgroup_size_control
  PipelineCapture capture = PipelineCapture::None;  // ignored where caps.pipeline_executable_info is false
};
using KernelId = uint32_t;

// A recorded command list: recorded once, submitted many times. Buffers named in dispatches must stay
// allocated while the list is used. A list that outlives its Device is inert: every call throws.
class CommandList {
 public:
  virtual ~CommandList() = default;
  // buffers bind to set 0, bindings 0..n-1; push may be shorter than the kernel's push_constant_bytes (the
  // rest reads as zero). Arguments are checked before anything is recorded.
  virtual void dispatch(KernelId kernel, std::span<const Buffer> buffers, std::span<const std::byte> push,
                        uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) = 0;
  // Writes of every earlier dispatch and copy become visible to every later one. Nothing is implied
  // between commands without one.
  virtual void barrier() = 0;
  virtual void copy(const Buffer& src, const Buffer& dst, uint64_t bytes) = 0;  // non-overlapping ranges
  virtual void timestamp(uint32_t query) = 0;  // query < timestamp_capacity given to record()
  virtual void begin_label(const std::string& label) = 0;
  virtual void end_label() = 0;
  virtual void finish() = 0;  // end recording
};

// Not thread-safe: use a Device (and its command lists) from one thread at a time.
class Device {
 public:
  virtual ~Device() = default;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual const DeviceCaps& caps() const = 0;

  // memory; throws DeviceError naming the requested size and heap budget when out of memory
  virtual Buffer alloc(uint64_t bytes) = 0;
  virtual void free(const Buffer& b) = 0;
  // Host-visible, coherent memory (a mapped range of host_pointer(b)'s bytes) for staging: command lists copy
  // to and from it, the host reads and writes it directly. Freed with free().
  virtual Buffer alloc_host(uint64_t bytes) = 0;
  virtual std::byte* host_pointer(const Buffer& b) = 0;  // DeviceError unless b lies in alloc_host memory
  virtual void upload(const Buffer& dst, const void* data, uint64_t bytes, uint64_t offset = 0) = 0;
  virtual void download(const Buffer& src, void* data, uint64_t bytes, uint64_t offset = 0) = 0;
  virtual void fill_zero(const Buffer& b) = 0;
  virtual uint64_t allocated_bytes() const = 0;  // bytes of device memory in blocks

  virtual KernelId create_kernel(const KernelDesc& desc) = 0;
  // The executables of a kernel created with a PipelineCapture, with what was captured; empty without
  // capture or where the device lacks VK_KHR_pipeline_executable_properties.
  virtual std::vector<PipelineExecutable> pipeline_executables(KernelId) { return {}; }
  // The driver's pipeline cache after every kernel created so far (vkGetPipelineCacheData): the Vulkan header
  // (length, version, vendor and device IDs, cache UUID), then the driver's own format. For tools that look
  // for the compiled machine code in it (pipeline_stats --cache, runtime/elf_scan.hpp); empty where there is
  // none.
  virtual std::vector<std::byte> pipeline_cache_data() { return {}; }

  virtual std::unique_ptr<CommandList> record(uint32_t timestamp_capacity = 0) = 0;
  // Returns at once with the submission's id (1, 2, ... in submission order). A list is pending at most once:
  // submitting it again first waits for its previous submission, so work in flight uses one list per frame.
  // Uploads and downloads wait for everything submitted before they start.
  virtual uint64_t submit(CommandList& list) = 0;
  virtual void wait() = 0;  // blocks until everything submitted finished
  // Blocks until submission `id` (and every earlier one) finished; 0 returns at once. DeviceError for an id
  // not yet handed out.
  virtual void wait(uint64_t id) = 0;
  // Whether submission `id` (and every earlier one) finished, without blocking (a host loop that overlaps
  // other work with the GPU's, such as the distributed step's all-reduces). DeviceError as wait(id).
  virtual bool finished(uint64_t id) = 0;
  // Timestamps of the last completed submission of `list`, in nanoseconds, one per query of the list's
  // timestamp_capacity; queries the list never wrote are NaN. Waits for the submission to finish.
  virtual std::vector<double> timestamps(CommandList& list) = 0;

  // Warnings and errors the validation layer reported since the device was opened (empty without
  // validation).
  // GPU tests fail when any appear.
  virtual std::vector<std::string> validation_messages() const { return {}; }
  // Messages set apart instead: a validation layer older than VK_KHR_cooperative_matrix flags every module
  // that uses it (three known messages, only for such modules); counted so a run can report them.
  virtual size_t validation_known_limits() const { return 0; }
  // The heaps with their budget and usage now (caps().heaps is the picture at open time).
  virtual std::vector<MemoryHeap> memory_heaps() const { return caps().heaps; }
};

// Every device the backend sees, in enumeration order. Throws DeviceError naming mesa-vulkan-drivers
// when there is no loader or no device.
std::vector<DeviceCaps> enumerate_devices(bool validation = false);
// The index open_device would pick: the device whose device_id matches, else the first discrete,
// integrated, virtual, CPU device. An id that matches nothing throws DeviceError listing the devices present.
// With a slot (a local rank), the slot-th (mod count) of the devices with that id, or of the best type.
size_t choose_device(const std::vector<DeviceCaps>& devices, std::optional<uint32_t> device_id,
                     std::optional<uint32_t> slot = std::nullopt);
// Opens the device chosen by choose_device(options.device_id).
std::unique_ptr<Device> open_device(const DeviceOptions& options);

}  // namespace meganeura::runtime
