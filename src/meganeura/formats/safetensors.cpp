#include "meganeura/formats/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "meganeura/core/error.hpp"

namespace meganeura {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors bytes are little-endian");

using json = nlohmann::json;

// Element sizes of the standard dtypes, so that offsets are checked even for tensors we cannot use.
uint64_t stored_dtype_size(const std::string& d) {
  static const std::map<std::string, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},     {"C64", 8}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

std::string at(const std::string& fn, const std::string& origin) { return "[" + fn + "] '" + origin + "': "; }

// Parses JSON and reports the first key that appears twice in one object (nlohmann would keep the last
// silently, and a header where two entries share a name is not the file its writer meant).
json parse_json_strict(std::string_view text, const std::string& where, const char* what) {
  struct Scope {
    std::set<std::string> keys;
    std::string name;
  };
  std::vector<Scope> scopes;
  std::string pending_key, duplicate, duplicate_in;
  auto cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: scopes.push_back({{}, pending_key}); break;
      case json::parse_event_t::object_end:
        if (!scopes.empty()) scopes.pop_back();
        break;
      case json::parse_event_t::key: {
        pending_key = parsed.get<std::string>();
        if (!scopes.empty() && !scopes.back().keys.insert(pending_key).second && duplicate.empty()) {
          duplicate = pending_key;
          duplicate_in = scopes.back().name;
        }
        break;
      }
      default: break;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    throw FormatError(where + "expected " + what + " to be well-formed UTF-8 JSON, got: " + e.what());
  }
  if (!duplicate.empty())
    throw FormatError(where + "expected unique keys in " + what + ", got '" + duplicate + "' twice" +
                      (duplicate_in.empty() ? std::string() : " inside '" + duplicate_in + "'"));
  return j;
}

bool as_u64(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

std::string span_text(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + "]";
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, const std::string& where) {
  const std::string t = where + "tensor '" + name + "': ";
  if (!v.is_object())
    throw FormatError(t + "expected an object {dtype, shape, data_offsets}, got " + v.type_name());
  SafetensorsEntry e;
  e.name = name;
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string())
    throw FormatError(t + "expected field 'dtype' to be a string, got " +
                      (dt == v.end() ? std::string("no such field") : dt->type_name()));
  e.dtype = dt->get<std::string>();
  const uint64_t elem = stored_dtype_size(e.dtype);
  if (elem == 0)
    throw FormatError(t +
                      "expected field 'dtype' to be a safetensors dtype (F32, F16, BF16, I32, ...), got '" +
                      e.dtype + "'");
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array())
    throw FormatError(t + "expected field 'shape' to be an array of dimensions, got " +
                      (sh == v.end() ? std::string("no such field") : sh->type_name()));
  uint64_t count = 1;
  for (size_t i = 0; i < sh->size(); ++i) {
    uint64_t d = 0;
    if (!as_u64((*sh)[i], d) || d > static_cast<uint64_t>(INT64_MAX))
      throw FormatError(t + "expected 'shape'[" + std::to_string(i) + "] to be a non-negative integer, got " +
                        (*sh)[i].dump());
    if (__builtin_mul_overflow(count, d, &count))
      throw FormatError(t + "expected 'shape' " + sh->dump() +
                        " to have fewer than 2^64 elements, got an overflow");
    e.shape.push_back(static_cast<int64_t>(d));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, elem, &bytes))
    throw FormatError(t + "expected 'shape' " + sh->dump() + " × " + std::to_string(elem) +
                      " bytes to fit 64 bits, got an overflow");
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !as_u64((*off)[0], e.begin) ||
      !as_u64((*off)[1], e.end))
    throw FormatError(t + "expected field 'data_offsets' to be [begin, end] of non-negative integers, got " +
                      (off == v.end() ? std::string("no such field") : off->dump()));
  if (e.end < e.begin)
    throw FormatError(t + "expected 'data_offsets' begin <= end, got " + span_text(e.begin, e.end));
  if (e.end - e.begin != bytes)
    throw FormatError(t + "expected 'data_offsets' " + span_text(e.begin, e.end) + " to span " +
                      std::to_string(bytes) + " bytes (shape " + sh->dump() + " × " + e.dtype + "), got " +
                      std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& origin) {
  const std::string where = at("safetensors", origin);
  if (file.size() < 8)
    throw FormatError(where + "expected at least 8 bytes (the header length), got " +
                      std::to_string(file.size()));
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  if (n > kSafetensorsMaxHeaderBytes)
    throw FormatError(where + "expected a header length of at most " +
                      std::to_string(kSafetensorsMaxHeaderBytes) + " bytes, got " + std::to_string(n) +
                      " (not a safetensors file, or corrupt)");
  if (n > file.size() - 8)
    throw FormatError(where + "expected a header of " + std::to_string(n) +
                      " bytes after the length, got a file of " + std::to_string(file.size()) +
                      " bytes (truncated)");
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, n);
  if (n == 0 || text[0] != '{')
    throw FormatError(where + "expected the header to start with '{', got " +
                      (n == 0 ? std::string("an empty header") : "byte " + std::to_string(uint8_t(text[0]))));
  const json j = parse_json_strict(text, where, "the header");
  if (!j.is_object())
    throw FormatError(where + "expected the header to be a JSON object, got " + j.type_name());

  SafetensorsHeader h;
  h.data_start = 8 + n;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object())
        throw FormatError(where + "expected '__metadata__' to be an object of strings, got " +
                          it->type_name());
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          throw FormatError(where + "expected '__metadata__' value '" + m.key() + "' to be a string, got " +
                            m->dump());
        h.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(it.key(), *it, where));
  }

  const uint64_t data_bytes = file.size() - h.data_start;
  for (const SafetensorsEntry& e : h.tensors)
    if (e.end > data_bytes)
      throw FormatError(where + "tensor '" + e.name + "': expected 'data_offsets' " +
                        span_text(e.begin, e.end) + " inside the data section of " +
                        std::to_string(data_bytes) + " bytes, got an end past it" + " (truncated file)");
  // The bytes must be covered exactly once, in order: sort by position and walk.
  std::stable_sort(h.tensors.begin(), h.tensors.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  uint64_t pos = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.begin < pos)
      throw FormatError(where + "tensor '" + e.name + "': expected 'data_offsets' " +
                        span_text(e.begin, e.end) + " not to overlap tensor '" + prev->name + "' " +
                        span_text(prev->begin, prev->end));
    if (e.begin > pos)
      throw FormatError(
          where + "tensor '" + e.name + "': expected 'data_offsets' to begin at " + std::to_string(pos) +
          (prev ? " where tensor '" + prev->name + "' ends" : std::string(" (the data section's start)")) +
          ", got " + std::to_string(e.begin) + " (a gap of unlisted bytes)");
    pos = e.end;
    prev = &e;
  }
  if (pos != data_bytes)
    throw FormatError(where + "expected the tensors to cover the " + std::to_string(data_bytes) +
                      "-byte data section, got " + std::to_string(data_bytes - pos) +
                      " trailing bytes after " +
                      (prev ? "tensor '" + prev->name + "'" : std::string("the header")));
  return h;
}

DType safetensors_dtype(const SafetensorsEntry& e, const std::string& origin) {
  if (e.dtype == "F32") return DType::F32;
  if (e.dtype == "F16") return DType::F16;
  if (e.dtype == "BF16") return DType::BF16;
  if (e.dtype == "I32") return DType::I32;
  if (e.dtype == "U32") return DType::U32;
  throw FormatError(at("safetensors", origin) + "tensor '" + e.name +
                    "': expected dtype F32, F16, BF16, I32 or U32, got " + e.dtype);
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::U32: return "U32";
    default: break;  // block-quantized dtypes have no safetensors name
  }
  return "?";
}

SafetensorsFile::SafetensorsFile(const std::string& path) : map_(path) {
  header_ = parse_safetensors(map_.bytes(), path);
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& e) const {
  return map_.bytes().subspan(header_.data_start + e.begin, e.end - e.begin);
}

SafetensorsView SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr)
    throw FormatError(at("SafetensorsFile::tensor", path()) + "expected a tensor named '" + name +
                      "', got none among " + std::to_string(header_.tensors.size()));
  return {e->name, safetensors_dtype(*e, path()), e->shape, bytes(*e)};
}

// --- sharded models -------------------------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;

// A shard name from an index: a relative path that stays inside the index's folder.
void check_shard_name(const std::string& shard, const std::string& tensor, const std::string& where) {
  const fs::path p(shard);
  bool escapes = shard.empty() || p.is_absolute();
  for (const auto& part : p) escapes |= part == "..";
  if (escapes)
    throw FormatError(where + "'weight_map' entry '" + tensor +
                      "': expected a shard file name relative to the index's folder, got '" + shard + "'");
}

}  // namespace

SafetensorsModel::SafetensorsModel(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "model.safetensors.index.json", ec))
      p /= "model.safetensors.index.json";
    else if (fs::exists(p / "model.safetensors", ec))
      p /= "model.safetensors";
    else
      throw FormatError(
          "[SafetensorsModel] '" + path +
          "': expected a folder holding model.safetensors or model.safetensors.index.json, got neither");
  }
  origin_ = p.string();
  if (p.extension() != ".json") {
    files_.push_back(std::make_unique<SafetensorsFile>(origin_));
    for (const SafetensorsEntry& e : files_[0]->entries()) where_[e.name] = 0;
    return;
  }
  const std::string where = at("SafetensorsModel", origin_);
  const MappedFile index(origin_);
  const std::string_view text(reinterpret_cast<const char*>(index.bytes().data()), index.size());
  const json j = parse_json_strict(text, where, "the index");
  if (!j.is_object())
    throw FormatError(where + "expected the index to be a JSON object, got " + j.type_name());
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object())
    throw FormatError(where + "expected field 'weight_map' to be an object {tensor: shard file}, got " +
                      (wm == j.end() ? std::string("no such field") : wm->type_name()));
  std::map<std::string, size_t> shard_index;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      throw FormatError(where + "'weight_map' entry '" + it.key() + "': expected a shard file name, got " +
                        it->dump());
    const std::string shard = it->get<std::string>();
    check_shard_name(shard, it.key(), where);
    auto [s, added] = shard_index.emplace(shard, files_.size());
    if (added) files_.push_back(std::make_unique<SafetensorsFile>((p.parent_path() / shard).string()));
    if (files_[s->second]->find(it.key()) == nullptr)
      throw FormatError(where + "'weight_map' entry '" + it.key() + "': expected shard '" + shard +
                        "' to hold that tensor, got none by that name");
    where_[it.key()] = s->second;
  }
  for (size_t f = 0; f < files_.size(); ++f)
    for (const SafetensorsEntry& e : files_[f]->entries()) {
      auto it = where_.find(e.name);
      if (it == where_.end())
        throw FormatError(where + "expected shards to hold only the tensors 'weight_map' lists, got shard '" +
                          files_[f]->path() + "' holding tensor '" + e.name + "', which it does not list");
      if (it->second != f)
        throw FormatError(where + "shard '" + files_[f]->path() + "' holds tensor '" + e.name +
                          "', expected it only in '" + files_[it->second]->path() + "' as 'weight_map' says");
    }
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : where_) out.push_back(name);
  return out;
}

const SafetensorsFile& SafetensorsModel::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end())
    throw FormatError(at("SafetensorsModel", origin_) + "expected a tensor named '" + name +
                      "', got none among " + std::to_string(where_.size()));
  return *files_[it->second];
}

const SafetensorsEntry& SafetensorsModel::entry(const std::string& name) const {
  return *file_of(name).find(name);
}

SafetensorsView SafetensorsModel::tensor(const std::string& name) const { return file_of(name).tensor(name); }

// --- writer ---------------------------------------------------------------------------------------------

std::vector<std::byte> serialize_safetensors(const std::vector<SafetensorsTensor>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  std::vector<const SafetensorsTensor*> order;
  std::set<std::string> names;
  for (const SafetensorsTensor& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw FormatError("[write_safetensors] expected unique tensor names other than '__metadata__', got '" +
                        t.name + "'" + (t.name == "__metadata__" ? "" : " twice"));
    uint64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
        throw FormatError("[write_safetensors] tensor '" + t.name +
                          "': expected non-negative dimensions, got " + std::to_string(d));
    }
    if (n != t.bytes.size())
      throw FormatError("[write_safetensors] tensor '" + t.name + "': expected " + std::to_string(n) +
                        " bytes for its shape, got " + std::to_string(t.bytes.size()));
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    const size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const SafetensorsTensor* t : order) {
    h[t->name] = {{"dtype", safetensors_dtype_name(t->dtype)},
                  {"shape", t->shape},
                  {"data_offsets", {off, off + t->bytes.size()}}};
    off += t->bytes.size();
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size() + off);
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* p = out.data() + 8 + text.size();
  for (const SafetensorsTensor* t : order) {
    if (!t->bytes.empty()) std::memcpy(p, t->bytes.data(), t->bytes.size());
    p += t->bytes.size();
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<std::byte> image = serialize_safetensors(tensors, metadata);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw FormatError("[write_safetensors] expected to " + what + " '" + tmp + "', got: " + reason);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create");
  const std::byte* p = image.data();
  size_t left = image.size();
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      ::close(fd);
      fail("write");
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("fsync");
  }
  if (::close(fd) != 0) fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename to '" + path + "'");
}

}  // namespace meganeura
