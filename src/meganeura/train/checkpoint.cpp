#include "meganeura/train/checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>

#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

constexpr char kMagic[8] = {'M', 'G', 'N', 'R', 'C', 'K', 'P', 'T'};
constexpr char kEnd[8] = {'M', 'G', 'N', 'R', '-', 'E', 'N', 'D'};
constexpr size_t kMaxDifferences = 8;

// Stable on-disk codes, independent of the DType enum's order.
uint8_t dtype_code(DType t) {
  switch (t) {
    case DType::F32: return 1;
    case DType::F16: return 2;
    case DType::BF16: return 3;
    case DType::I32: return 4;
    case DType::U32: return 5;
    case DType::Q4_0: return 6;
    case DType::Q4_1: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q8_0: return 10;
    case DType::Q4_K: return 11;
    case DType::Q5_K: return 12;
    case DType::Q6_K: return 13;
  }
  return 0;
}

bool dtype_from_code(uint8_t c, DType& out) {
  switch (c) {
    case 1: out = DType::F32; return true;
    case 2: out = DType::F16; return true;
    case 3: out = DType::BF16; return true;
    case 4: out = DType::I32; return true;
    case 5: out = DType::U32; return true;
    case 6: out = DType::Q4_0; return true;
    case 7: out = DType::Q4_1; return true;
    case 8: out = DType::Q5_0; return true;
    case 9: out = DType::Q5_1; return true;
    case 10: out = DType::Q8_0; return true;
    case 11: out = DType::Q4_K; return true;
    case 12: out = DType::Q5_K; return true;
    case 13: out = DType::Q6_K; return true;
    default: return false;
  }
}

uint32_t crc(const void* data, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  // zlib's length is a uInt: feed large tensors in pieces.
  while (n > 0) {
    const uInt piece = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, p, piece);
    p += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(c);
}

class Writer {
 public:
  std::vector<uint8_t> buf;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf.insert(buf.end(), b, b + n);
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
};

// Bounds-checked reads: a corrupt length must produce an error, never a read past the buffer.
class Reader {
 public:
  Reader(std::span<const uint8_t> b, size_t begin, size_t end, const std::string& path)
      : b_(b), pos_(begin), end_(end), path_(path) {}
  void need(size_t n, const char* what) {
    if (n > end_ - pos_)
      throw CheckpointError("[restore_checkpoint] '" + path_ + "': expected " + std::to_string(n) +
                            " more bytes for " + what + " at offset " + std::to_string(pos_) + ", got " +
                            std::to_string(end_ - pos_) + " (truncated or corrupt header)");
  }
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const uint32_t n = get<uint32_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> b_;
  size_t pos_, end_;
  const std::string& path_;
};

[[noreturn]] void fail_io(const std::string& what, const std::string& path) {
  throw CheckpointError("[save_checkpoint] expected to " + what + " '" + path +
                        "', got: " + std::strerror(errno));
}

void write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_io("write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw CheckpointError("[restore_checkpoint] expected a readable checkpoint at '" + path +
                          "', got: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw CheckpointError("[restore_checkpoint] expected a checkpoint file at '" + path + "', got " +
                          (dir ? "a directory" : "something that is not a regular file"));
  }
  std::vector<uint8_t> b(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < b.size()) {
    const ssize_t r = ::read(fd, b.data() + done, b.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      throw CheckpointError("[restore_checkpoint] expected to read " + std::to_string(b.size()) +
                            " bytes of '" + path + "', got " + std::to_string(done) +
                            (r < 0 ? std::string(": ") + std::strerror(errno) : ""));
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return b;
}

// The counters stores keep in the metadata: decimal, no sign, in range. Checked before anything is written,
// so a file with valid checksums but a bad value changes nothing.
void check_counters(const std::map<std::string, std::string>& meta, const std::string& path) {
  const std::pair<const char*, uint64_t> counters[] = {{"optimizer_step", (uint64_t{1} << 32) - 1},
                                                       {"update_step", uint64_t(INT64_MAX)},
                                                       {"epochs_done", uint64_t(INT32_MAX)}};
  for (const auto& [key, max] : counters) {
    auto it = meta.find(key);
    if (it == meta.end()) continue;
    const std::string& v = it->second;
    bool ok = !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos;
    if (ok) ok = std::stoull(v) <= max;
    if (!ok)
      throw CheckpointError("[restore_checkpoint] '" + path + "': expected metadata '" + key +
                            "' to be a count in [0, " + std::to_string(max) + "], got '" + v.substr(0, 40) +
                            "'; nothing was changed");
  }
}

// Temporary files of earlier saves of `path` whose writer died (kill -9, power loss): "<path>.tmp-<pid>"
// with no process <pid>. A live pid may be another process saving the same path right now: left alone.
void remove_orphans(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t p = static_cast<pid_t>(std::stol(pid));
    if (p == ::getpid() || p <= 0) continue;
    if (::kill(p, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    fs::remove(it->path(), rm);
  }
}

// Parses and checks the file's own consistency; tensor payload CRCs are checked too so that a restore
// never starts on a damaged file.
CheckpointContents parse(std::span<const uint8_t> b, const std::string& path) {
  const std::string at = "[restore_checkpoint] '" + path + "': ";
  const size_t fixed = sizeof(kMagic) + 8;
  if (b.size() < fixed + 4 + sizeof(kEnd) + 8)
    throw CheckpointError(at + "expected a checkpoint of at least " +
                          std::to_string(fixed + 4 + sizeof(kEnd) + 8) + " bytes, got " +
                          std::to_string(b.size()) + " (truncated)");
  if (std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0)
    throw CheckpointError(at + "expected the magic 'MGNRCKPT', got another file type");
  CheckpointContents c;
  uint32_t header_bytes = 0;
  std::memcpy(&c.version, b.data() + 8, 4);
  std::memcpy(&header_bytes, b.data() + 12, 4);
  if (c.version != kCheckpointVersion)
    throw CheckpointError(at + "expected format version " + std::to_string(kCheckpointVersion) + ", got " +
                          std::to_string(c.version));
  // Trailer first: it tells a truncated file from a corrupt one.
  uint64_t recorded_size = 0;
  std::memcpy(&recorded_size, b.data() + b.size() - 8, 8);
  if (std::memcmp(b.data() + b.size() - 16, kEnd, sizeof(kEnd)) != 0 || recorded_size != b.size())
    throw CheckpointError(at + "expected the end marker and a recorded size equal to the file's " +
                          std::to_string(b.size()) + " bytes, got " +
                          (std::memcmp(b.data() + b.size() - 16, kEnd, sizeof(kEnd)) != 0
                               ? std::string("no end marker (truncated or overwritten)")
                               : "a recorded size of " + std::to_string(recorded_size)));
  const size_t data_end = b.size() - 16;
  if (header_bytes > data_end - fixed - 4)
    throw CheckpointError(at + "expected a header of at most " + std::to_string(data_end - fixed - 4) +
                          " bytes, got " + std::to_string(header_bytes));
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, b.data() + fixed + header_bytes, 4);
  const uint32_t actual_crc = crc(b.data() + fixed, header_bytes);
  if (stored_crc != actual_crc)
    throw CheckpointError(at + "expected header CRC32 " + std::to_string(stored_crc) + ", got " +
                          std::to_string(actual_crc) + " (the header is corrupt)");
  Reader r(b, fixed, fixed + header_bytes, path);
  const uint32_t n_meta = r.get<uint32_t>("the metadata count");
  for (uint32_t i = 0; i < n_meta; ++i) {
    std::string k = r.str("a metadata key");
    c.metadata[k] = r.str("a metadata value");
  }
  const uint32_t n = r.get<uint32_t>("the tensor count");
  const size_t payload_begin = fixed + header_bytes + 4;
  std::string bad;
  size_t bad_count = 0;
  for (uint32_t i = 0; i < n; ++i) {
    CheckpointEntry e;
    e.info.name = r.str("a tensor name");
    const uint8_t role = r.get<uint8_t>("a role"), dt = r.get<uint8_t>("a dtype"),
                  rank = r.get<uint8_t>("a rank");
    r.get<uint8_t>("padding");
    if (role > 1 || !dtype_from_code(dt, e.info.dtype))
      throw CheckpointError(at + "tensor '" + e.info.name +
                            "': expected role 0..1 and dtype code 1..5, got " + std::to_string(role) +
                            " and " + std::to_string(dt));
    e.info.role = static_cast<TensorRole>(role);
    for (uint8_t d = 0; d < rank; ++d) {
      const int64_t dim = r.get<int64_t>("a dimension");
      if (dim < 0 || dim > (int64_t{1} << 40))
        throw CheckpointError(at + "tensor '" + e.info.name + "': expected a dimension in [0, 2^40], got " +
                              std::to_string(dim));
      e.info.shape.push_back(dim);
    }
    e.offset = r.get<uint64_t>("an offset");
    e.bytes = r.get<uint64_t>("a size");
    e.crc32 = r.get<uint32_t>("a checksum");
    if (e.bytes != e.info.byte_size())
      throw CheckpointError(at + describe(e.info) + ": expected " + std::to_string(e.info.byte_size()) +
                            " bytes for its shape, got " + std::to_string(e.bytes));
    if (e.offset < payload_begin || e.offset > data_end || e.bytes > data_end - e.offset)
      throw CheckpointError(at + describe(e.info) + ": expected its bytes inside the file's data section [" +
                            std::to_string(payload_begin) + ", " + std::to_string(data_end) +
                            "), got offset " + std::to_string(e.offset) + " size " + std::to_string(e.bytes));
    const uint32_t got = crc(b.data() + e.offset, e.bytes);
    if (got != e.crc32 && bad_count++ < kMaxDifferences)
      bad += "\n  - " + describe(e.info) + ": expected CRC32 " + std::to_string(e.crc32) + ", got " +
             std::to_string(got);
    c.entries.push_back(std::move(e));
  }
  if (bad_count > 0)
    throw CheckpointError(at + "expected every tensor's checksum to match, got " + std::to_string(bad_count) +
                          " corrupt tensor(s):" + bad);
  return c;
}

}  // namespace

void save_checkpoint(const std::string& path, TensorStore& store, const SaveOptions& options) {
  const std::vector<TensorInfo> infos = store.tensors();
  std::vector<std::vector<std::byte>> data;
  data.reserve(infos.size());
  for (const TensorInfo& t : infos) {
    data.push_back(store.read(t));
    if (data.back().size() != t.byte_size())
      throw CheckpointError("[save_checkpoint] " + describe(t) + ": expected " +
                            std::to_string(t.byte_size()) + " bytes from the store, got " +
                            std::to_string(data.back().size()));
  }
  // The header needs the offsets, the offsets need the header's size: its size does not depend on the
  // offset values, so build it once with zeros to measure, then for real.
  auto build_header = [&](uint64_t first_offset) {
    Writer h;
    const auto meta = store.metadata();
    h.put<uint32_t>(static_cast<uint32_t>(meta.size()));
    for (const auto& [k, v] : meta) {
      h.str(k);
      h.str(v);
    }
    h.put<uint32_t>(static_cast<uint32_t>(infos.size()));
    uint64_t off = first_offset;
    for (size_t i = 0; i < infos.size(); ++i) {
      const TensorInfo& t = infos[i];
      h.str(t.name);
      h.put<uint8_t>(static_cast<uint8_t>(t.role));
      h.put<uint8_t>(dtype_code(t.dtype));
      h.put<uint8_t>(static_cast<uint8_t>(t.shape.size()));
      h.put<uint8_t>(0);
      for (int64_t d : t.shape) h.put<int64_t>(d);
      h.put<uint64_t>(off);
      h.put<uint64_t>(data[i].size());
      h.put<uint32_t>(crc(data[i].data(), data[i].size()));
      off += data[i].size();
    }
    return h.buf;
  };
  const size_t header_size = build_header(0).size();
  const uint64_t first = sizeof(kMagic) + 8 + header_size + 4;
  Writer w;
  w.bytes(kMagic, sizeof(kMagic));
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint32_t>(static_cast<uint32_t>(header_size));
  const std::vector<uint8_t> header = build_header(first);
  w.bytes(header.data(), header.size());
  w.put<uint32_t>(crc(header.data(), header.size()));
  for (const auto& d : data) w.bytes(d.data(), d.size());
  w.bytes(kEnd, sizeof(kEnd));
  w.put<uint64_t>(w.buf.size() + 8);

  remove_orphans(path);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io("create", tmp);
  bool open = true;
  try {
    write_all(fd, w.buf.data(), w.buf.size(), tmp);
    if (::fsync(fd) != 0) fail_io("fsync", tmp);
    open = false;
    if (::close(fd) != 0) fail_io("close", tmp);
  } catch (...) {
    if (open) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  try {
    if (options.before_rename) options.before_rename(tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail_io("rename to '" + path + "'", tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename itself is durable only once the directory entry is synced.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace {
std::span<const uint8_t> as_u8(std::span<const std::byte> b) {
  return {reinterpret_cast<const uint8_t*>(b.data()), b.size()};
}
}  // namespace

CheckpointContents inspect_checkpoint(const std::string& path) { return parse(read_file(path), path); }

CheckpointContents inspect_checkpoint_bytes(std::span<const std::byte> file, const std::string& name) {
  return parse(as_u8(file), name);
}

RestoreReport restore_checkpoint(const std::string& path, TensorStore& store) {
  const std::vector<uint8_t> file = read_file(path);
  return restore_checkpoint_bytes(std::as_bytes(std::span<const uint8_t>(file)), path, store);
}

RestoreReport restore_checkpoint_bytes(std::span<const std::byte> bytes, const std::string& path,
                                       TensorStore& store) {
  const std::span<const uint8_t> file = as_u8(bytes);
  const CheckpointContents c = parse(file, path);
  const std::vector<TensorInfo> wanted = store.tensors();
  bool wants_state = false;
  for (const TensorInfo& t : wanted) wants_state |= t.role == TensorRole::OptimizerState;

  std::vector<std::string> diffs;
  size_t total = 0;
  auto diff = [&](std::string s) {
    if (total++ < kMaxDifferences) diffs.push_back(std::move(s));
  };
  std::map<std::string, const CheckpointEntry*> by_name;
  for (const CheckpointEntry& e : c.entries) by_name[e.info.name] = &e;
  std::map<std::string, bool> wanted_names;
  for (const TensorInfo& t : wanted) {
    wanted_names[t.name] = true;
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      diff("missing " + describe(t));
      continue;
    }
    const TensorInfo& f = it->second->info;
    if (f.role != t.role || f.dtype != t.dtype || f.shape != t.shape)
      diff("'" + t.name + "': expected " + describe(t) + ", got " + describe(f));
  }
  check_counters(c.metadata, path);
  if (wants_state) {
    // Adam, AdamW and LaProp keep identically named moments: the kind must match, not just the names. A
    // store that names its optimizer accepts state only from a file that names the same one.
    const auto mine = store.metadata();
    auto a = mine.find("optimizer");
    auto b = c.metadata.find("optimizer");
    if (a != mine.end() && (b == c.metadata.end() || a->second != b->second))
      diff("optimizer: expected state of " + a->second + ", got " +
           (b == c.metadata.end() ? std::string("a file that names no optimizer") : b->second));
  }
  RestoreReport report;
  for (const CheckpointEntry& e : c.entries) {
    if (wanted_names.count(e.info.name)) continue;
    if (e.info.role == TensorRole::OptimizerState && !wants_state) {
      ++report.skipped_optimizer_state;
      continue;
    }
    diff("unexpected " + describe(e.info) + " in the file");
  }
  if (total > 0) {
    std::string msg = "[restore_checkpoint] '" + path + "': expected tensors matching the session, got " +
                      std::to_string(total) + " difference(s); nothing was changed. First differences:";
    for (const std::string& d : diffs) msg += "\n  - " + d;
    if (total > diffs.size()) msg += "\n  ... and " + std::to_string(total - diffs.size()) + " more";
    throw CheckpointError(msg);
  }
  for (const TensorInfo& t : wanted) {
    const CheckpointEntry& e = *by_name.at(t.name);
    store.write(
        t, std::span<const std::byte>(reinterpret_cast<const std::byte*>(file.data() + e.offset), e.bytes));
    if (t.role == TensorRole::Parameter)
      ++report.parameters;
    else
      ++report.optimizer_state;
  }
  if (wants_state)
    store.set_metadata(c.metadata);
  else {
    // A store without optimizer state (inference, plain SGD) gets everything but the optimizer's keys.
    std::map<std::string, std::string> kept;
    for (const auto& [k, v] : c.metadata)
      if (k != "optimizer" && k != "optimizer_step") kept[k] = v;
    store.set_metadata(kept);
  }
  return report;
}

}  // namespace meganeura
