#include "meganeura/hub/hub.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "meganeura/core/error.hpp"
#include "meganeura/hub/http.hpp"
#include "meganeura/hub/sha256.hpp"

namespace meganeura::hf {
namespace {

namespace fs = std::filesystem;
using Kind = HubError::Kind;

bool is_hex(const std::string& s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_commit(const std::string& s) { return is_hex(s, 40); }

// A name that becomes one path component (an etag): no separators, no dot-only names.
bool safe_component(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 255) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  return true;
}

// A relative path inside the repo: no empty, "." or ".." parts, no leading '/'.
bool safe_relative(const std::string& s) {
  if (s.empty() || s.front() == '/' || s.back() == '/') return false;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find('/', b);
    if (e == std::string::npos) e = s.size();
    const std::string part = s.substr(b, e - b);
    if (part.empty() || part == "." || part == "..") return false;
    b = e + 1;
  }
  return s.find('\0') == std::string::npos;
}

void check_arguments(const HubConfig& config, const std::string& repo, const std::string& file,
                     const std::string& revision) {
  const size_t slash = repo.find('/');
  bool repo_ok =
      !repo.empty() && repo.find('/', slash == std::string::npos ? 0 : slash + 1) == std::string::npos;
  for (char c : repo)
    repo_ok &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
               c == '_' || c == '.' || c == '/';
  repo_ok = repo_ok && repo.find("..") == std::string::npos && repo.front() != '/' && repo.back() != '/' &&
            repo.find("--") == std::string::npos;
  if (!repo_ok)
    throw ConfigError("[hf::download] expected a repo id ORG/NAME of letters, digits, '-', '_', '.', got '" +
                      repo + "'");
  if (!safe_relative(file))
    throw ConfigError("[hf::download] expected a file path inside the repo (no '..', no leading '/'), got '" +
                      file + "'");
  if (!safe_relative(revision))
    throw ConfigError("[hf::download] expected a revision (branch, tag or commit), got '" + revision + "'");
  if (config.home.empty() && config.hub_cache.empty())
    throw ConfigError(
        "[hf::download] expected a cache folder (HubConfig::home or hub_cache; HF_HOME), got none");
}

// Percent-encoding of everything but RFC 3986's unreserved characters (and '/' where kept).
std::string quote(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
        c == '.' || c == '~' || (keep_slash && c == '/'))
      out += static_cast<char>(c);
    else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// "scheme://host[:port]" of a URL.
std::string origin_of(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  const size_t path = url.find('/', scheme + 3);
  return url.substr(0, path);
}

std::string normalize_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

std::string describe(const std::string& repo, const std::string& file, const std::string& revision) {
  return "'" + file + "' of '" + repo + "' at revision '" + revision + "'";
}

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The snapshot path of `file` for `revision` from the cache alone.
std::optional<fs::path> cached(const fs::path& folder, const std::string& revision, const std::string& file) {
  std::string commit = revision;
  if (!is_commit(revision)) {
    auto ref = read_text(folder / "refs" / revision);
    if (!ref || !is_commit(*ref)) return std::nullopt;
    commit = *ref;
  }
  const fs::path p = folder / "snapshots" / commit / file;
  std::error_code ec;
  if (fs::exists(p, ec)) return p;  // follows the symlink: a dangling pointer is not a hit
  return std::nullopt;
}

[[noreturn]] void http_failure(const HttpResponse& r, const std::string& what, const std::string& url) {
  const std::string code = r.header("x-error-code"), message = r.header("x-error-message");
  std::string why;
  const int s = static_cast<int>(r.status);
  if (s == 401)
    why =
        "401 Unauthorized: the repository is private or gated, or does not exist; set HF_TOKEN to a token "
        "with "
        "read access";
  else if (s == 403)
    why =
        "403 Forbidden: the token has no access to this repository (a gated model's terms may need "
        "accepting)";
  else if (s == 404 && code == "RepoNotFound")
    why = "404: no such repository";
  else if (s == 404 && code == "RevisionNotFound")
    why = "404: no such revision";
  else if (s == 404 && code == "EntryNotFound")
    why = "404: no such file at this revision";
  else if (s == 404)
    why = "404 Not Found";
  else
    why = "HTTP " + std::to_string(s);
  if (!message.empty()) why += " (" + message + ")";
  throw HubError(Kind::Http, "[hf::download] expected " + what + " from " + url + ", got " + why, s);
}

std::string format_bytes(uint64_t n) {
  char buf[32];
  if (n >= (1u << 30))
    std::snprintf(buf, sizeof buf, "%.2f GB", n / double(1u << 30));
  else if (n >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f MB", n / double(1u << 20));
  else if (n >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f kB", n / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

// One redrawn bar on a terminal; a line per tenth otherwise.
class Progress {
 public:
  Progress(const DownloadOptions& o, std::string name, uint64_t total, uint64_t start)
      : out_(o.progress_out),
        name_(std::move(name)),
        total_(total),
        start_bytes_(start),
        t0_(std::chrono::steady_clock::now()) {
    style_ = o.progress;
    if (out_ == nullptr) style_ = ProgressStyle::Off;
    if (style_ == ProgressStyle::Auto)
      style_ = ::isatty(::fileno(out_)) ? ProgressStyle::Bar : ProgressStyle::Lines;
    if (style_ == ProgressStyle::Lines)
      std::fprintf(out_, "download %s: %s%s\n", name_.c_str(), format_bytes(total_).c_str(),
                   start > 0 ? (", resuming at " + format_bytes(start)).c_str() : "");
    last_tenth_ = total_ ? static_cast<int>(10 * start / total_) : 0;
  }
  void update(uint64_t done) {
    if (style_ == ProgressStyle::Lines && total_ > 0) {
      const int tenth = static_cast<int>(10 * done / total_);
      if (tenth > last_tenth_ && tenth < 10) {
        last_tenth_ = tenth;
        std::fprintf(out_, "download %s: %d%% (%s)\n", name_.c_str(), tenth * 10, format_bytes(done).c_str());
      }
    } else if (style_ == ProgressStyle::Bar) {
      const double t = seconds();
      if (t - last_draw_ < 0.1 && done != total_) return;
      last_draw_ = t;
      const int width = 30;
      const int fill = total_ ? static_cast<int>(width * done / total_) : 0;
      const double rate = t > 0 ? (done - start_bytes_) / t : 0;
      std::fprintf(out_, "\r%s [%s%s] %3d%% %s/%s %s/s ", name_.c_str(), std::string(fill, '#').c_str(),
                   std::string(width - fill, '.').c_str(), total_ ? static_cast<int>(100 * done / total_) : 0,
                   format_bytes(done).c_str(), format_bytes(total_).c_str(),
                   format_bytes(uint64_t(rate)).c_str());
      std::fflush(out_);
    }
  }
  void done(uint64_t bytes) {
    if (style_ == ProgressStyle::Bar) {
      update(bytes);
      std::fprintf(out_, "\n");
    } else if (style_ == ProgressStyle::Lines) {
      std::fprintf(out_, "download %s: done, %s in %.1f s\n", name_.c_str(), format_bytes(bytes).c_str(),
                   seconds());
    }
  }

 private:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  std::FILE* out_;
  ProgressStyle style_;
  std::string name_;
  uint64_t total_, start_bytes_;
  std::chrono::steady_clock::time_point t0_;
  int last_tenth_ = 0;
  double last_draw_ = -1;
};

// An exclusive flock, the same kind Python's filelock takes, so two downloaders never write one blob.
class FileLock {
 public:
  explicit FileLock(const fs::path& p) {
    fs::create_directories(p.parent_path());
    fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw HubError(Kind::Cache, "[hf::download] expected to create the lock '" + p.string() +
                                      "', got: " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

struct Metadata {
  std::string commit, etag, location;
  uint64_t size = 0;
  bool has_size = false;
};

std::vector<std::string> auth_headers(const HubConfig& config, const std::string& url) {
  std::vector<std::string> h = {"User-Agent: meganeura/0.1"};
  // The token goes to the hub only, never to the storage a download is redirected to.
  if (!config.token.empty() && origin_of(url) == origin_of(config.endpoint))
    h.push_back("Authorization: Bearer " + config.token);
  return h;
}

Metadata head(const HubConfig& config, const std::string& url, const DownloadOptions& options,
              const std::string& what) {
  std::string target = url;
  HttpResponse r;
  for (int hops = 0;; ++hops) {
    HttpRequest q;
    q.url = target;
    q.head = true;
    q.headers = auth_headers(config, target);
    q.headers.push_back("Accept-Encoding: identity");
    q.connect_timeout_s = options.timeout_s;
    q.stall_timeout_s = options.timeout_s;
    r = http_request(q);
    // A redirect on the same host is the hub itself (a renamed repo): follow it. One to another host is the
    // storage holding an LFS file, and this response already carries the metadata (huggingface_hub's rule).
    const std::string loc = r.header("location");
    if (r.status >= 300 && r.status < 400 && !loc.empty() && hops < 10 &&
        (loc.front() == '/' || origin_of(loc) == origin_of(target))) {
      target = loc.front() == '/' ? origin_of(target) + loc : loc;
      continue;
    }
    break;
  }
  if (r.status >= 400 || r.status < 200) http_failure(r, what, url);
  Metadata m;
  m.commit = r.header("x-repo-commit");
  m.etag = normalize_etag(!r.header("x-linked-etag").empty() ? r.header("x-linked-etag") : r.header("etag"));
  const std::string size =
      !r.header("x-linked-size").empty() ? r.header("x-linked-size") : r.header("content-length");
  if (!size.empty() && size.find_first_not_of("0123456789") == std::string::npos && size.size() < 20) {
    m.size = std::stoull(size);
    m.has_size = true;
  }
  const std::string loc = r.header("location");
  m.location = r.status >= 300 && r.status < 400 && !loc.empty() ? loc : target;
  if (!m.location.empty() && m.location.front() == '/') m.location = origin_of(target) + m.location;
  if (!is_commit(m.commit))
    throw HubError(Kind::Http,
                   "[hf::download] expected header X-Repo-Commit (a 40-digit commit hash) from " + url +
                       ", got '" + m.commit + "': is HF_ENDPOINT (" + config.endpoint +
                       ") a Hugging Face hub?",
                   static_cast<int>(r.status));
  if (!safe_component(m.etag))
    throw HubError(Kind::Http,
                   "[hf::download] expected header X-Linked-Etag or ETag naming the file's blob from " + url +
                       ", got '" + m.etag + "'",
                   static_cast<int>(r.status));
  if (!m.has_size)
    throw HubError(
        Kind::Http,
        "[hf::download] expected header X-Linked-Size or Content-Length from " + url + ", got none",
        static_cast<int>(r.status));
  return m;
}

// Fetches the blob into `incomplete`, resuming what is there, then checks its size and (LFS) SHA-256.
// A dropped transfer is resumed up to options.retries times and otherwise keeps the partial file for the
// next call; a wrong size or checksum deletes it.
void fetch(const HubConfig& config, const Metadata& m, const fs::path& incomplete, const std::string& what,
           const std::string& name, const DownloadOptions& options) {
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    uint64_t have = fs::exists(incomplete, ec) ? fs::file_size(incomplete, ec) : 0;
    if (ec || have > m.size) {
      fs::remove(incomplete, ec);
      have = 0;
    }
    if (have == m.size) break;
    std::FILE* f = std::fopen(incomplete.c_str(), have > 0 ? "ab" : "wb");
    if (f == nullptr)
      throw HubError(Kind::Cache, "[hf::download] expected to write '" + incomplete.string() +
                                      "', got: " + std::strerror(errno));
    Progress progress(options, name, m.size, have);
    uint64_t written = have;
    bool write_failed = false, first = true;
    HttpRequest q;
    q.url = m.location;
    q.follow_redirects = true;
    q.headers = auth_headers(config, m.location);
    if (have > 0) q.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
    q.connect_timeout_s = options.timeout_s;
    q.stall_timeout_s = options.timeout_s;
    q.on_body = [&](long status, const char* data, size_t n) {
      if (first && have > 0 && status == 200) {
        // The server ignored the Range and sends the whole file: start it over.
        if (std::fflush(f) != 0 || ::ftruncate(::fileno(f), 0) != 0) {  // append mode: writes follow the end
          write_failed = true;
          return false;
        }
        written = 0;
      }
      first = false;
      if (std::fwrite(data, 1, n, f) != n) {
        write_failed = true;
        return false;
      }
      written += n;
      progress.update(written);
      return written <= m.size;  // more than announced: stop, the size check below reports it
    };
    HttpResponse response;
    try {
      response = http_request(q);
    } catch (const HubError& e) {
      std::fclose(f);
      if (e.kind() == Kind::Network && attempt < options.retries && !write_failed) continue;
      std::error_code size_ec;
      const uint64_t kept = fs::exists(incomplete, size_ec) ? fs::file_size(incomplete, size_ec) : 0;
      throw HubError(Kind::Network, std::string(e.what()) + "; " + std::to_string(kept) + " of " +
                                        std::to_string(m.size) + " bytes of " + what + " are kept in '" +
                                        incomplete.string() + "' and the next download resumes from there");
    }
    std::fclose(f);
    if (response.status == 416 && attempt < options.retries) {
      // The partial file is no prefix the server can extend: start over.
      fs::remove(incomplete, ec);
      continue;
    }
    if (response.status < 200 || response.status >= 300) {
      if (fs::exists(incomplete, ec) && fs::file_size(incomplete, ec) == 0) fs::remove(incomplete, ec);
      http_failure(response, what, m.location);
    }
    progress.done(written);
    break;
  }
  std::error_code ec;
  const uint64_t got = fs::exists(incomplete, ec) ? fs::file_size(incomplete, ec) : 0;
  if (got != m.size) {
    fs::remove(incomplete, ec);
    throw HubError(Kind::Checksum, "[hf::download] expected " + std::to_string(m.size) + " bytes of " + what +
                                       ", got " + std::to_string(got) +
                                       "; the download was removed, not cached");
  }
  if (is_hex(m.etag, 64)) {
    const std::string digest = sha256_file(incomplete.string());
    if (digest != m.etag) {
      fs::remove(incomplete, ec);
      throw HubError(Kind::Checksum, "[hf::download] expected SHA-256 " + m.etag + " (its ETag) for " + what +
                                         ", got " + digest +
                                         "; the corrupt download was removed, not cached");
    }
  }
}

void link_pointer(const fs::path& blob, const fs::path& pointer) {
  fs::create_directories(pointer.parent_path());
  std::error_code ec;
  fs::remove(pointer, ec);
  // Lexical, as huggingface_hub's os.path.relpath: the link survives a move of the whole cache.
  const fs::path target = fs::absolute(blob).lexically_normal().lexically_relative(
      fs::absolute(pointer.parent_path()).lexically_normal());
  fs::create_symlink(target, pointer, ec);
  if (ec && !(fs::is_symlink(pointer) && fs::equivalent(pointer, blob)))
    throw HubError(Kind::Cache, "[hf::download] expected to link '" + pointer.string() + "' to '" +
                                    target.string() + "', got: " + ec.message());
}

void write_ref(const fs::path& folder, const std::string& revision, const std::string& commit) {
  if (revision == commit) return;
  const fs::path ref = folder / "refs" / revision;
  if (read_text(ref) == commit) return;
  fs::create_directories(ref.parent_path());
  const fs::path tmp = ref.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << commit;
  }
  fs::rename(tmp, ref);
}

}  // namespace

namespace {
std::string download_checked(const HubConfig& config, const std::string& repo, const std::string& file,
                             const std::string& revision, const DownloadOptions& options);
}  // namespace

std::string repo_folder(const HubConfig& config, const std::string& repo) {
  std::string name = "models--" + repo;
  for (size_t p = 0; (p = name.find('/', p)) != std::string::npos;) name.replace(p, 1, "--");
  return (fs::path(config.cache_dir()) / name).string();
}

std::string download(const HubConfig& config, const std::string& repo, const std::string& file,
                     const std::string& revision, const DownloadOptions& options) {
  check_arguments(config, repo, file, revision);
  try {
    return download_checked(config, repo, file, revision, options);
  } catch (const fs::filesystem_error& e) {
    throw HubError(Kind::Cache, "[hf::download] expected to write " + describe(repo, file, revision) +
                                    " into the cache at '" + config.cache_dir() + "', got: " + e.what());
  }
}

namespace {

std::string download_checked(const HubConfig& config, const std::string& repo, const std::string& file,
                             const std::string& revision, const DownloadOptions& options) {
  const fs::path folder = repo_folder(config, repo);
  const std::string what = describe(repo, file, revision);
  if (is_commit(revision))
    if (auto hit = cached(folder, revision, file)) return hit->string();
  if (config.offline) {
    if (auto hit = cached(folder, revision, file)) return hit->string();
    throw HubError(Kind::Offline,
                   "[hf::download] expected " + what + " in the cache at '" + folder.string() +
                       "' (offline mode: HF_HUB_OFFLINE is set), got none; download it once online");
  }
  const std::string url =
      config.endpoint + "/" + repo + "/resolve/" + quote(revision, false) + "/" + quote(file, true);
  Metadata m;
  try {
    m = head(config, url, options, what);
  } catch (const HubError& e) {
    // No network: the cached snapshot of the revision serves, as huggingface_hub does.
    if (e.kind() != Kind::Network) throw;
    if (auto hit = cached(folder, revision, file)) return hit->string();
    throw HubError(Kind::Network, std::string(e.what()) + "; and " + what + " is not in the cache at '" +
                                      folder.string() + "'");
  }
  fs::create_directories(folder);
  write_ref(folder, revision, m.commit);
  const fs::path pointer = folder / "snapshots" / m.commit / file;
  std::error_code ec;
  if (fs::exists(pointer, ec)) return pointer.string();
  const fs::path blob = folder / "blobs" / m.etag;
  const fs::path lock_path = fs::path(config.cache_dir()) / ".locks" / folder.filename() / (m.etag + ".lock");
  {
    FileLock lock(lock_path);
    if (!fs::exists(blob, ec)) {
      fs::create_directories(blob.parent_path());
      const fs::path incomplete = blob.string() + ".incomplete";
      fetch(config, m, incomplete, what, file, options);
      fs::rename(incomplete, blob);
    }
  }
  link_pointer(blob, pointer);
  return pointer.string();
}

}  // namespace

Snapshot download_files(const HubConfig& config, const std::string& repo,
                        const std::vector<std::string>& files, const std::string& revision,
                        const DownloadOptions& options) {
  Snapshot s;
  std::string rev = revision;
  for (const std::string& f : files) {
    const fs::path p = download(config, repo, f, rev, options);
    if (s.commit.empty()) {
      // snapshots/<commit>/<file>: every later file comes from the same commit, even if the branch moves.
      fs::path dir = p;
      for (size_t parts = std::count(f.begin(), f.end(), '/') + 1; parts > 0; --parts)
        dir = dir.parent_path();
      s.folder = dir.string();
      s.commit = dir.filename().string();
      rev = s.commit;
    }
    s.files.push_back(f);
  }
  return s;
}

Snapshot download_model(const HubConfig& config, const std::string& repo, const std::string& revision,
                        const DownloadOptions& options) {
  Snapshot s = download_files(config, repo, {"config.json"}, revision, options);
  auto optional_file = [&](const std::string& f) {
    try {
      download(config, repo, f, s.commit, options);
      s.files.push_back(f);
      return true;
    } catch (const HubError& e) {
      if ((e.kind() == Kind::Http && e.status() == 404) || e.kind() == Kind::Offline) return false;
      throw;
    }
  };
  optional_file("tokenizer.json");
  if (optional_file("model.safetensors.index.json")) {
    const fs::path index = fs::path(s.folder) / "model.safetensors.index.json";
    std::vector<std::string> shards;
    try {
      std::ifstream in(index);
      const nlohmann::json j = nlohmann::json::parse(in);
      for (const auto& [tensor, shard] : j.at("weight_map").items())
        if (std::find(shards.begin(), shards.end(), shard.get<std::string>()) == shards.end())
          shards.push_back(shard.get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      throw FormatError("[hf::download_model] '" + index.string() +
                        "': expected JSON with a 'weight_map' of {tensor: shard file}, got: " + e.what());
    }
    for (const std::string& shard : shards) {
      download(config, repo, shard, s.commit, options);
      s.files.push_back(shard);
    }
  } else {
    download(config, repo, "model.safetensors", s.commit, options);
    s.files.push_back("model.safetensors");
  }
  return s;
}

}  // namespace meganeura::hf
