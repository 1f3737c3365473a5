#pragma once
// Hugging Face hub downloads into the cache layout huggingface_hub uses, so that files are shared with
// Python users:
//   <cache>/models--ORG--NAME/blobs/<etag>                  the bytes (etag: sha256 for LFS files, git sha1
//   else)
//                              snapshots/<commit>/<file>   -> ../../blobs/<etag> (relative symlink)
//                              refs/<revision>             the commit a branch or tag resolved to
//   <cache>/.locks/models--ORG--NAME/<etag>.lock           flock'ed while a blob is fetched
// A file is asked for at {endpoint}/{repo}/resolve/{revision}/{file}: a HEAD gives the commit
// (X-Repo-Commit), the etag (X-Linked-Etag, else ETag), the size (X-Linked-Size, else Content-Length) and,
// for LFS files, a redirect to the storage; the GET resumes a partial blob (<etag>.incomplete) with Range,
// and an LFS blob enters the cache only when its SHA-256 equals the etag.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace meganeura::hf {

// Filled by SessionConfig::from_env (HF_HOME, HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN or $HF_HOME/token,
// HF_HUB_OFFLINE); nothing in hub/ reads the environment.
struct HubConfig {
  std::string home;  // HF_HOME; from_env's default: $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface
  std::string hub_cache;  // HF_HUB_CACHE; "" means home + "/hub"
  std::string endpoint = "https://huggingface.co";
  std::string token;     // sent as "Authorization: Bearer" to the endpoint's host only
  bool offline = false;  // only the cache is read; a missing file is a HubError of kind Offline
  std::string cache_dir() const { return hub_cache.empty() ? home + "/hub" : hub_cache; }
};

enum class ProgressStyle { Auto, Bar, Lines, Off };  // Auto: a bar on a terminal, lines otherwise

struct DownloadOptions {
  ProgressStyle progress = ProgressStyle::Auto;
  std::FILE* progress_out = stderr;
  int retries = 3;      // a dropped transfer resumes from where it stopped, this many more times
  long timeout_s = 10;  // connect timeout; a transfer stalled this long (under 1 byte/s) also fails
};

// The path of `file` (which may hold '/') in the snapshot of `revision` (a branch, tag or commit). A file
// already in the snapshot of a commit given by hash is returned without any request; otherwise a HEAD finds
// the commit and etag, and a blob already in the cache is not fetched again. Without a network the cached
// snapshot of the revision serves. HubError names the repo, file and revision: 401/403 (token), 404
// (repo, revision or file), offline and absent, network failure, checksum mismatch.
std::string download(const HubConfig& config, const std::string& repo, const std::string& file,
                     const std::string& revision = "main", const DownloadOptions& options = {});

// A model folder: config.json, tokenizer.json and the weights (model.safetensors.index.json and its shards,
// or model.safetensors), all from the one commit `revision` resolves to.
struct Snapshot {
  std::string folder;  // <cache>/models--ORG--NAME/snapshots/<commit>
  std::string commit;
  std::vector<std::string> files;  // relative to folder
};
// `files`: downloaded in order at the commit the first one resolves to.
Snapshot download_files(const HubConfig& config, const std::string& repo,
                        const std::vector<std::string>& files, const std::string& revision = "main",
                        const DownloadOptions& options = {});
// config.json, tokenizer.json (when the repo has one) and the safetensors weights, sharded or not.
Snapshot download_model(const HubConfig& config, const std::string& repo,
                        const std::string& revision = "main", const DownloadOptions& options = {});

// <cache>/models--ORG--NAME.
std::string repo_folder(const HubConfig& config, const std::string& repo);

}  // namespace meganeura::hf
