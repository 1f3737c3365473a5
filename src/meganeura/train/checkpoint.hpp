#pragma once
// Checkpoint files: a versioned header listing every tensor (name, role, dtype, shape, offset, size, CRC32),
// the logical tensor bytes, and a trailer. Saved atomically; restored only after every check passed.
//
// Layout (little-endian), version 1:
//   "MGNRCKPT" u32 version u32 header_bytes
//   header: u32 n_meta {u32 len key, u32 len value}*  u32 n_tensors
//           {u32 len name, u8 role, u8 dtype, u8 rank, u8 0, i64 dims[rank], u64 offset, u64 bytes, u32
//           crc32}*
//   u32 crc32(header)
//   tensor bytes at their offsets
//   "MGNR-END" u64 file size
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "meganeura/train/tensor_store.hpp"

namespace meganeura {

inline constexpr uint32_t kCheckpointVersion = 1;

struct SaveOptions {
  // Called after the temporary file is complete and synced, before it replaces `path`; a hook that throws
  // aborts the save (the temporary file is removed and the previous checkpoint stays). Tests use it to
  // simulate a crash at the worst moment.
  std::function<void(const std::string& temp_path)> before_rename;
};

struct RestoreReport {
  size_t parameters = 0, optimizer_state = 0;
  size_t skipped_optimizer_state = 0;  // present in the file, not wanted by the store (inference)
};

// One tensor as listed in a checkpoint's header.
struct CheckpointEntry {
  TensorInfo info;
  uint64_t offset = 0, bytes = 0;
  uint32_t crc32 = 0;
};

struct CheckpointContents {
  uint32_t version = 0;
  std::map<std::string, std::string> metadata;
  std::vector<CheckpointEntry> entries;
};

void save_checkpoint(const std::string& path, TensorStore& store, const SaveOptions& options = {});
// Reads and checks the whole file (format, sizes, checksums), then compares it with store.tensors(); only
// when nothing differs does it write into the store. Otherwise CheckpointError lists the first differences.
RestoreReport restore_checkpoint(const std::string& path, TensorStore& store);
// The header of a checkpoint, after the same format and checksum checks as a restore.
CheckpointContents inspect_checkpoint(const std::string& path);
// The same two on a checkpoint's bytes already in memory (the path-taking ones read the file and call
// these); `name` stands for the file in error messages.
RestoreReport restore_checkpoint_bytes(std::span<const std::byte> file, const std::string& name,
                                       TensorStore& store);
CheckpointContents inspect_checkpoint_bytes(std::span<const std::byte> file, const std::string& name);

}  // namespace meganeura
