// The Vulkan device layer on lavapipe: selection, memory, kernels, command lists, timestamps, validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "gpu_fixture.hpp"
#include "meganeura/runtime/vk_api.hpp"  // the loader entry, to test the no-loader error

namespace {

using meganeura::DeviceError;
using meganeura::runtime::Buffer;
using meganeura::runtime::DeviceOptions;
using meganeura::runtime::KernelDesc;
using meganeura::test::gpu_device;
using meganeura::test::gpu_options;
using meganeura::test::GpuTest;
namespace runtime = meganeura::runtime;

std::vector<uint32_t> pattern(size_t words, uint32_t seed) {
  std::vector<uint32_t> v(words);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& w : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    w = x;
  }
  return v;
}

TEST(DeviceSelect, EnumeratesAtLeastOneDeviceWithCaps) {
  auto devices = runtime::enumerate_devices(false);
  ASSERT_FALSE(devices.empty());
  for (const auto& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.max_workgroup_invocations, 0u);
    EXPECT_GT(d.max_storage_buffer_range, 0u);
    EXPECT_GT(d.subgroup_size, 0u);
    EXPECT_FALSE(d.heaps.empty());
    EXPECT_NE(d.to_json().find("\"name\""), std::string::npos);
    EXPECT_NE(d.to_table().find(d.name), std::string::npos);
  }
}

TEST(DeviceSelect, ById) {
  auto devices = runtime::enumerate_devices(false);
  DeviceOptions o = gpu_options();
  o.device_id = devices[0].device_id;
  auto dev = runtime::open_device(o);
  EXPECT_EQ(dev->caps().device_id, devices[0].device_id);
  EXPECT_TRUE(dev->validation_messages().empty());
}

TEST(DeviceSelect, UnknownIdListsDevicesPresent) {
  auto devices = runtime::enumerate_devices(false);
  DeviceOptions o = gpu_options();
  o.device_id = 0xbeef;
  for (const auto& d : devices) ASSERT_NE(d.device_id, 0xbeefu);
  try {
    runtime::open_device(o);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("0xbeef"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MEGANEURA_DEVICE_ID"), std::string::npos) << msg;
    for (const auto& d : devices) EXPECT_NE(msg.find(d.name), std::string::npos) << msg;
  }
}

TEST(DeviceSelect, NoDriverSaysWhichPackage) {
  // The loader reads VK_ICD_FILENAMES; pointing it nowhere is "no driver installed". Each ctest case runs
  // in its own process, so this does not leak into other tests.
  setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
  setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
  try {
    runtime::enumerate_devices(false);
    ADD_FAILURE() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("mesa-vulkan-drivers"), std::string::npos) << e.what();
  }
  unsetenv("VK_ICD_FILENAMES");
  unsetenv("VK_DRIVER_FILES");
}

class DeviceMemory : public GpuTest {};

TEST_F(DeviceMemory, RoundTripsAtSeveralSizes) {
  for (size_t bytes : {size_t(4), size_t(12), size_t(256), size_t(1000), size_t(65536), size_t(3u << 20)}) {
    Buffer b = device().alloc(bytes);
    auto data = pattern((bytes + 3) / 4, static_cast<uint32_t>(bytes));
    device().upload(b, data.data(), bytes);
    std::vector<uint32_t> back((bytes + 3) / 4, 0);
    device().download(b, back.data(), bytes);
    EXPECT_EQ(std::memcmp(back.data(), data.data(), bytes), 0) << bytes << " bytes";
    device().free(b);
  }
}

// Larger than the 64 MiB staging buffer: the transfer goes in chunks, each landing at the right offset.
TEST_F(DeviceMemory, RoundTripLargerThanStaging) {
  const size_t bytes = (72u << 20) + 12;
  if (bytes > device().caps().max_storage_buffer_range) {
    FAIL() << "device storage range below 72 MiB: " << device().caps().max_storage_buffer_range;
  }
  Buffer b = device().alloc(bytes);
  auto data = pattern(bytes / 4, 77);
  device().upload(b, data.data(), bytes);
  std::vector<uint32_t> back(bytes / 4, 0);
  device().download(b, back.data(), bytes);
  EXPECT_TRUE(back == data);
  device().free(b);
}

TEST_F(DeviceMemory, PartialRangesAndZeroFill) {
  Buffer b = device().alloc(1024);
  auto data = pattern(256, 7);
  device().upload(b, data.data(), 1024);
  device().fill_zero(b);
  std::vector<uint32_t> back(256, 1);
  device().download(b, back.data(), 1024);
  for (uint32_t w : back) ASSERT_EQ(w, 0u);
  device().upload(b, data.data(), 64, 512);
  device().download(b, back.data(), 128, 448);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], 0u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[16 + i], data[i]);
  EXPECT_THROW(device().upload(b, data.data(), 1024, 4), DeviceError);
  EXPECT_THROW(device().download(b, back.data(), 2048), DeviceError);
  device().free(b);
  EXPECT_THROW(device().free(b), DeviceError);
}

// Small blocks make the allocator cross block boundaries with little memory.
TEST(DeviceBlocks, SubAllocationAcrossBlockBoundaries) {
  DeviceOptions o = gpu_options();
  o.block_bytes = 64 << 10;
  auto dev = runtime::open_device(o);
  std::vector<Buffer> bufs;
  std::vector<std::vector<uint32_t>> datas;
  // 40 KiB buffers: two don't fit one block, so every allocation after the first lands in a new block.
  for (uint32_t i = 0; i < 5; ++i) {
    bufs.push_back(dev->alloc(40 << 10));
    datas.push_back(pattern((40 << 10) / 4, i + 100));
    dev->upload(bufs.back(), datas.back().data(), 40 << 10);
  }
  // A buffer larger than a block gets a block of its own size.
  bufs.push_back(dev->alloc(200 << 10));
  datas.push_back(pattern((200 << 10) / 4, 999));
  dev->upload(bufs.back(), datas.back().data(), 200 << 10);
  // Small buffers share blocks and must not overlap.
  for (uint32_t i = 0; i < 20; ++i) {
    bufs.push_back(dev->alloc(1000));
    datas.push_back(pattern(250, i));
    dev->upload(bufs.back(), datas.back().data(), 1000);
  }
  std::set<uint32_t> blocks;
  for (const Buffer& b : bufs) {
    blocks.insert(b.block);
    EXPECT_EQ(b.offset % std::max<uint32_t>(dev->caps().min_storage_buffer_offset_alignment, 1), 0u);
  }
  EXPECT_GE(blocks.size(), 6u);
  EXPECT_LE(dev->allocated_bytes(), 6u * (64 << 10) + (200 << 10) + (64 << 10));
  for (size_t i = 0; i < bufs.size(); ++i) {
    std::vector<uint32_t> back(datas[i].size());
    dev->download(bufs[i], back.data(), bufs[i].size);
    EXPECT_EQ(back, datas[i]) << "buffer " << i;
  }
  // Freed space is reused before a new block is made.
  const uint64_t before = dev->allocated_bytes();
  dev->free(bufs[1]);
  Buffer again = dev->alloc(40 << 10);
  EXPECT_EQ(again.block, bufs[1].block);
  EXPECT_EQ(dev->allocated_bytes(), before);
  EXPECT_TRUE(dev->validation_messages().empty());
}

TEST(DeviceBlocks, OutOfMemoryNamesSizeAndBudget) {
  auto& dev = gpu_device();
  const uint64_t huge = 1ull << 50;
  try {
    dev.alloc(huge);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::to_string(huge)), std::string::npos) << msg;
    EXPECT_NE(msg.find("budget"), std::string::npos) << msg;
  }
}

TEST(DeviceBlocks, HostVisibleModeRoundTrips) {
  auto dev = runtime::open_device(gpu_options(true));
  Buffer b = dev->alloc(4096);
  auto data = pattern(1024, 3);
  dev->upload(b, data.data(), 4096);
  std::vector<uint32_t> back(1024);
  dev->download(b, back.data(), 4096);
  EXPECT_EQ(back, data);
  EXPECT_TRUE(dev->validation_messages().empty());
}

// out[i] = in[i] * MUL + push.add, for i < push.n; MUL is specialization constant 0, workgroup size
// constant 1.
const char* kAffine = R"(#version 450
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const float MUL = 1.0;
layout(std430, set = 0, binding = 0) readonly buffer In { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { float y[]; };
layout(push_constant) uniform Push { float add; uint n; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) y[i] = x[i] * MUL + pc.add;
}
)";

struct AffinePush {
  float add;
  uint32_t n;
};

class DeviceKernels : public GpuTest {
 protected:
  runtime::KernelId affine(float mul, uint32_t wg) {
    KernelDesc d;
    d.label = "affine";
    d.spirv = meganeura::test::compile_test_kernel("affine", kAffine);
    d.num_buffers = 2;
    d.push_constant_bytes = sizeof(AffinePush);
    uint32_t mul_bits;
    std::memcpy(&mul_bits, &mul, 4);
    d.spec_constants = {mul_bits, wg};
    return device().create_kernel(d);
  }
};

TEST_F(DeviceKernels, SpecAndPushConstantsMatchCpu) {
  const uint32_t n = 1000;
  auto k = affine(3.0f, 64);
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = 0.25f * i - 7.0f;
  Buffer in = device().alloc(n * 4), out = device().alloc(n * 4 + 64);
  device().upload(in, x.data(), n * 4);
  device().fill_zero(out);
  AffinePush p{0.5f, n};
  auto list = device().record();
  Buffer bufs[2] = {in, out};
  list->dispatch(k, bufs, std::as_bytes(std::span(&p, 1)), (n + 63) / 64);
  list->finish();
  device().submit(*list);
  device().wait();
  std::vector<float> y(n + 16, -1.0f);
  device().download(out, y.data(), (n + 16) * 4);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 3.0f + 0.5f) << i;
  for (uint32_t i = n; i < n + 16; ++i) ASSERT_EQ(y[i], 0.0f) << "written past n at " << i;
  device().free(in);
  device().free(out);
}

TEST_F(DeviceKernels, RecordedOnceSubmittedThreeTimes) {
  // Each replay runs x <- x * 2 + 1 in place through a temp: the result shows how many times it ran.
  const uint32_t n = 256;
  auto k = affine(2.0f, 32);
  Buffer x = device().alloc(n * 4), tmp = device().alloc(n * 4);
  std::vector<float> host(n);
  for (uint32_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 17);
  device().upload(x, host.data(), n * 4);
  AffinePush p{1.0f, n};
  auto list = device().record();
  Buffer fwd[2] = {x, tmp};
  list->dispatch(k, fwd, std::as_bytes(std::span(&p, 1)), n / 32);
  list->barrier();
  list->copy(tmp, x, n * 4);
  list->finish();
  for (int rep = 0; rep < 3; ++rep) device().submit(*list);
  device().wait();
  std::vector<float> back(n);
  device().download(x, back.data(), n * 4);
  for (uint32_t i = 0; i < n; ++i) {
    float want = host[i];
    for (int rep = 0; rep < 3; ++rep) want = want * 2.0f + 1.0f;
    ASSERT_EQ(back[i], want) << i;
  }
  EXPECT_THROW(list->barrier(), DeviceError);  // recording is over
}

TEST_F(DeviceKernels, TimestampsAreOrderedNanoseconds) {
  const uint32_t n = 1 << 16;
  auto k = affine(1.5f, 64);
  Buffer in = device().alloc(n * 4), out = device().alloc(n * 4);
  device().fill_zero(in);
  AffinePush p{1.0f, n};
  auto list = device().record(4);
  Buffer bufs[2] = {in, out};
  list->begin_label("timed");
  list->timestamp(0);
  list->dispatch(k, bufs, std::as_bytes(std::span(&p, 1)), n / 64);
  list->barrier();
  list->timestamp(1);
  list->end_label();
  list->finish();
  EXPECT_THROW(device().timestamps(*list), DeviceError);  // never submitted
  for (int rep = 0; rep < 2; ++rep) {
    device().submit(*list);
    device().wait();
    std::vector<double> t = device().timestamps(*list);
    ASSERT_EQ(t.size(), 4u);
    EXPECT_GT(t[1], t[0]);
    EXPECT_LT(t[1] - t[0], 60e9) << "more than a minute: not nanoseconds?";
    EXPECT_TRUE(std::isnan(t[2]) && std::isnan(t[3])) << "unwritten queries";
  }
  device().free(in);
  device().free(out);
}

TEST_F(DeviceKernels, DispatchOnSlicesOfOneArena) {
  const uint32_t n = 300;
  auto k = affine(-2.0f, 64);
  const uint64_t align = std::max<uint32_t>(device().caps().min_storage_buffer_offset_alignment, 4);
  const uint64_t out_at = (n * 4 + align - 1) / align * align;
  Buffer arena = device().alloc(out_at + n * 4);
  Buffer in = runtime::slice(arena, 0, n * 4), out = runtime::slice(arena, out_at, n * 4);
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) - 100.0f;
  device().upload(in, x.data(), n * 4);
  AffinePush p{4.0f, n};
  auto list = device().record();
  Buffer bufs[2] = {in, out};
  list->dispatch(k, bufs, std::as_bytes(std::span(&p, 1)), (n + 63) / 64);
  Buffer misaligned[2] = {runtime::slice(arena, align / 2, 16), out};
  EXPECT_THROW(list->dispatch(k, misaligned, std::as_bytes(std::span(&p, 1)), 1), DeviceError);
  list->finish();
  device().submit(*list);
  std::vector<float> y(n);
  device().download(out, y.data(), n * 4);  // waits for the submission
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * -2.0f + 4.0f) << i;
  std::vector<float> x_again(n);
  device().download(in, x_again.data(), n * 4);
  EXPECT_EQ(x_again, x);
  device().free(arena);
}

TEST_F(DeviceKernels, BadUseIsAnError) {
  auto k = affine(1.0f, 64);
  Buffer a = device().alloc(64);
  auto list = device().record(1);
  Buffer one[1] = {a};
  AffinePush p{0, 0};
  EXPECT_THROW(list->dispatch(k, one, std::as_bytes(std::span(&p, 1)), 1), DeviceError);  // 1 buffer, wants 2
  EXPECT_THROW(list->dispatch(k + 100, one, {}, 1), DeviceError);
  EXPECT_THROW(list->timestamp(1), DeviceError);
  EXPECT_THROW(device().submit(*list), DeviceError);  // not finished
  KernelDesc bad;
  bad.label = "bad";
  bad.spirv = {1, 2, 3};
  EXPECT_THROW(device().create_kernel(bad), DeviceError);
  device().free(a);
}

}  // namespace

namespace {

// The fixture's guarantee rests on the messenger actually catching layer output: prove it with a
// deliberate misuse (a push-constant range smaller than the shader's block) on a validating device.
TEST(DeviceValidation, LayerMessagesAreCaught) {
  DeviceOptions o = gpu_options();
  o.validation = true;
  auto dev = runtime::open_device(o);
  EXPECT_TRUE(dev->validation_messages().empty());
  KernelDesc d;
  d.label = "misdeclared";
  d.spirv = meganeura::test::compile_test_kernel("misdeclared", kAffine);
  d.num_buffers = 2;
  d.push_constant_bytes = 4;  // the shader's block is 8 bytes
  try {
    dev->create_kernel(d);
  } catch (const DeviceError&) {
    // a driver may refuse the pipeline too; the layer's message is what this test is about
  }
  const auto messages = dev->validation_messages();
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages[0].find("[vulkan"), std::string::npos) << messages[0];
}

}  // namespace

namespace {

runtime::DeviceCaps fake(const char* name, const char* type, uint32_t id) {
  runtime::DeviceCaps c;
  c.name = name;
  c.device_type = type;
  c.device_id = id;
  return c;
}

TEST(DeviceSelect, PreferenceOrderAndIds) {
  std::vector<runtime::DeviceCaps> d = {fake("llvmpipe", "cpu", 0), fake("virtio", "virtual", 0x10),
                                        fake("igpu", "integrated", 0x46a6), fake("H200", "discrete", 0x2335)};
  EXPECT_EQ(runtime::choose_device(d, std::nullopt), 3u);
  EXPECT_EQ(runtime::choose_device({d[0], d[1], d[2]}, std::nullopt), 2u);
  EXPECT_EQ(runtime::choose_device({d[0], d[1]}, std::nullopt), 1u);
  EXPECT_EQ(runtime::choose_device({d[0]}, std::nullopt), 0u);
  EXPECT_EQ(runtime::choose_device(d, 0x46a6u), 2u);
  EXPECT_EQ(runtime::choose_device(d, 0u), 0u);
  try {
    runtime::choose_device(d, 0x1234u);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    for (const char* want : {"0x1234", "llvmpipe", "virtio", "igpu", "H200", "0x2335", "discrete"}) {
      EXPECT_NE(msg.find(want), std::string::npos) << want << " in " << msg;
    }
  }
  EXPECT_THROW(runtime::choose_device({}, std::nullopt), DeviceError);
}

// One process per GPU: local rank r takes the r-th (mod count) of the equal candidates, identical GPUs
// included.
TEST(DeviceSelect, SlotPicksAmongEqualCandidates) {
  std::vector<runtime::DeviceCaps> d = {fake("llvmpipe", "cpu", 0), fake("H200", "discrete", 0x2335),
                                        fake("igpu", "integrated", 0x46a6), fake("H200", "discrete", 0x2335)};
  EXPECT_EQ(runtime::choose_device(d, std::nullopt, 0u), 1u);
  EXPECT_EQ(runtime::choose_device(d, std::nullopt, 1u), 3u);
  EXPECT_EQ(runtime::choose_device(d, std::nullopt, 2u), 1u);
  EXPECT_EQ(runtime::choose_device(d, 0x2335u, 1u),
            3u);  // MEGANEURA_DEVICE_ID first, then the slot among matches
  EXPECT_EQ(runtime::choose_device(d, 0x46a6u, 1u), 2u);
  EXPECT_EQ(runtime::choose_device(d, 0u, 5u), 0u);
}

TEST(DeviceBlocks, LiveHeapUsageGrowsWithBlocks) {
  DeviceOptions o = gpu_options();
  o.block_bytes = 4 << 20;
  auto dev = runtime::open_device(o);
  ASSERT_FALSE(dev->memory_heaps().empty());
  const uint64_t before = dev->allocated_bytes();
  Buffer b = dev->alloc(1 << 20);
  EXPECT_GE(dev->allocated_bytes(), before + (4u << 20));
  dev->free(b);
  EXPECT_TRUE(dev->validation_messages().empty());
}

}  // namespace

namespace {

// A machine without the Vulkan loader: the library names the packages instead of failing to start.
TEST(DeviceSelect, NoLoaderSaysWhichPackage) {
  try {
    meganeura::runtime::vk::load_global("libvulkan-not-installed.so.1");
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mesa-vulkan-drivers"), std::string::npos) << msg;
    EXPECT_NE(msg.find("libvulkan1"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(meganeura::runtime::vk::load_global());
}

}  // namespace

namespace {

class DeviceSlices : public GpuTest {};

// A memory plan carves one allocation into slices; each must behave like a buffer of its own and never
// touch its neighbours.
TEST_F(DeviceSlices, SlicesRoundTripZeroAndBind) {
  Buffer arena = device().alloc(4096);
  std::vector<uint8_t> ones(4096, 0xab);
  device().upload(arena, ones.data(), 4096);
  // Odd edges: fill_zero on bytes [5, 5 + 1003) only.
  device().fill_zero(runtime::slice(arena, 5, 1003));
  std::vector<uint8_t> back(4096);
  device().download(arena, back.data(), 4096);
  for (size_t i = 0; i < 4096; ++i) {
    const uint8_t want = (i >= 5 && i < 1008) ? 0 : 0xab;
    ASSERT_EQ(back[i], want) << "byte " << i;
  }
  Buffer s = runtime::slice(arena, 2048, 1024);
  std::vector<uint32_t> data = pattern(256, 5);
  device().upload(s, data.data(), 1024);
  std::vector<uint32_t> words(1024);
  device().download(arena, words.data(), 4096);
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(words[512 + i], data[i]);
  EXPECT_THROW(runtime::slice(arena, 4000, 100), DeviceError);
  {
    auto list = device().record();
    EXPECT_THROW(list->copy(runtime::slice(arena, 0, 64), runtime::slice(arena, 32, 64), 64), DeviceError);
    list->copy(runtime::slice(arena, 0, 64), runtime::slice(arena, 64, 64), 64);
  }
  EXPECT_THROW(device().upload(Buffer{arena.block, arena.offset + 4096 + 4096, 16}, data.data(), 16),
               DeviceError);
  device().free(arena);
  EXPECT_THROW(device().upload(s, data.data(), 16), DeviceError);  // its allocation is gone
}

}  // namespace
