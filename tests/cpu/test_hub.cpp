// hf::download against a local stand-in for the hub (tests/hub/hub_server.py, python3's http.server on
// 127.0.0.1): the cache layout huggingface_hub uses, cache hits without a transfer, a dropped transfer that
// resumes, a corrupt blob that never enters the cache, offline mode, HTTP errors; SHA-256 against FIPS 180-4
// vectors and Python's hashlib. The expected etags come from the server's hashlib manifest.
#include <gtest/gtest.h>

#include "hub/hub_fixture.hpp"
#include "meganeura/hub/sha256.hpp"

namespace {

namespace fs = std::filesystem;
using namespace meganeura;
using namespace meganeura::test;

TEST_F(HubTest, DownloadsIntoTheHuggingFaceCacheLayout) {
  start();
  const std::string path = hf::download(config_, "org/tiny", "model.safetensors", "main", options_);
  const fs::path repo = repo_dir("org/tiny");
  EXPECT_EQ(repo, fs::path(config_.home) / "hub" / "models--org--tiny");
  EXPECT_EQ(fs::path(path), repo / "snapshots" / kCommitA / "model.safetensors");
  EXPECT_EQ(slurp(path), weights_);
  // An LFS file's blob is named by its SHA-256; the snapshot entry is a relative symlink to it.
  const std::string sha = etag("org/tiny", kCommitA, "model.safetensors");
  ASSERT_EQ(sha.size(), 64u);
  EXPECT_TRUE(fs::is_symlink(path));
  EXPECT_EQ(fs::read_symlink(path), fs::path("../../blobs") / sha);
  EXPECT_EQ(slurp(repo / "blobs" / sha), weights_);
  EXPECT_FALSE(fs::exists(repo / "blobs" / (sha + ".incomplete")));
  EXPECT_EQ(slurp(repo / "refs" / "main"), kCommitA);
  // A small file's blob is named by its git blob SHA-1 (the ETag), and nested paths nest in the snapshot.
  const std::string nested = hf::download(config_, "org/tiny", "sub/notes.txt", "main", options_);
  EXPECT_EQ(fs::path(nested), repo / "snapshots" / kCommitA / "sub" / "notes.txt");
  EXPECT_EQ(fs::read_symlink(nested),
            fs::path("../../../blobs") / etag("org/tiny", kCommitA, "sub/notes.txt"));
  EXPECT_EQ(slurp(nested), "nested file");
}

TEST_F(HubTest, SecondDownloadIsACacheHit) {
  start();
  const std::string first = hf::download(config_, "org/tiny", "model.safetensors", "main", options_);
  clear_log();
  // By branch: one HEAD to learn the commit, no transfer.
  EXPECT_EQ(hf::download(config_, "org/tiny", "model.safetensors", "main", options_), first);
  const auto log = requests();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].rfind("HEAD /org/tiny/resolve/main/model.safetensors", 0), 0u) << log[0];
  // By commit hash: no request at all, even with the server gone.
  stop();
  EXPECT_EQ(hf::download(config_, "org/tiny", "model.safetensors", kCommitA, options_), first);
}

TEST_F(HubTest, InterruptedDownloadResumesOnTheNextCall) {
  start("drop-once");
  options_.retries = 0;
  const HubError e =
      hub_error([&] { hf::download(config_, "org/tiny", "model.safetensors", "main", options_); });
  EXPECT_EQ(e.kind(), HubError::Kind::Network);
  EXPECT_TRUE(contains(e.what(), "resumes")) << e.what();
  const std::string sha = etag("org/tiny", kCommitA, "model.safetensors");
  const fs::path incomplete = repo_dir("org/tiny") / "blobs" / (sha + ".incomplete");
  ASSERT_TRUE(fs::exists(incomplete));
  const uint64_t kept = fs::file_size(incomplete);
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, weights_.size());
  EXPECT_EQ(slurp(incomplete), weights_.substr(0, kept));
  EXPECT_FALSE(fs::exists(repo_dir("org/tiny") / "blobs" / sha));
  EXPECT_FALSE(fs::exists(repo_dir("org/tiny") / "snapshots" / kCommitA / "model.safetensors"));
  clear_log();
  const std::string path = hf::download(config_, "org/tiny", "model.safetensors", "main", options_);
  EXPECT_EQ(slurp(path), weights_);
  bool ranged = false;
  for (const std::string& l : requests())
    ranged |= contains(l, "GET /lfs/" + sha + " bytes=" + std::to_string(kept) + "-");
  EXPECT_TRUE(ranged) << "the second call did not ask for the missing bytes only";
}

TEST_F(HubTest, DroppedTransferResumesWithinOneCall) {
  start("drop-once");
  const std::string path = hf::download(config_, "org/tiny", "model.safetensors", "main", options_);
  EXPECT_EQ(slurp(path), weights_);
  int gets = 0;
  bool ranged = false;
  for (const std::string& l : requests()) {
    gets += contains(l, "GET /lfs/");
    ranged |= contains(l, "GET /lfs/") && contains(l, "bytes=");
  }
  EXPECT_EQ(gets, 2);
  EXPECT_TRUE(ranged);
}

TEST_F(HubTest, ServerIgnoringRangeRestartsTheFile) {
  start("no-range");
  const std::string sha = etag("org/tiny", kCommitA, "model.safetensors");
  const fs::path incomplete = repo_dir("org/tiny") / "blobs" / (sha + ".incomplete");
  put(incomplete, weights_.substr(0, 1000));
  const std::string path = hf::download(config_, "org/tiny", "model.safetensors", "main", options_);
  EXPECT_EQ(slurp(path), weights_);
}

TEST_F(HubTest, CorruptBlobIsRejectedAndNotLinked) {
  start("corrupt");
  const HubError e =
      hub_error([&] { hf::download(config_, "org/tiny", "model.safetensors", "main", options_); });
  const std::string sha = etag("org/tiny", kCommitA, "model.safetensors");
  EXPECT_EQ(e.kind(), HubError::Kind::Checksum);
  EXPECT_TRUE(contains(e.what(), sha)) << e.what();
  EXPECT_TRUE(contains(e.what(), "'model.safetensors' of 'org/tiny' at revision 'main'")) << e.what();
  const fs::path repo = repo_dir("org/tiny");
  EXPECT_FALSE(fs::exists(repo / "blobs" / sha));
  EXPECT_FALSE(fs::exists(repo / "blobs" / (sha + ".incomplete")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(repo / "snapshots" / kCommitA / "model.safetensors")));
  // The next, healthy download succeeds from scratch.
  start();
  EXPECT_EQ(slurp(hf::download(config_, "org/tiny", "model.safetensors", "main", options_)), weights_);
}

TEST_F(HubTest, OfflineModeUsesTheCacheAndFailsClearlyWithout) {
  config_.offline = true;
  config_.endpoint = "http://127.0.0.1:9";  // never contacted
  const HubError absent =
      hub_error([&] { hf::download(config_, "org/tiny", "config.json", "main", options_); });
  EXPECT_EQ(absent.kind(), HubError::Kind::Offline);
  EXPECT_TRUE(contains(absent.what(), "HF_HUB_OFFLINE")) << absent.what();
  EXPECT_TRUE(contains(absent.what(), "'config.json' of 'org/tiny' at revision 'main'")) << absent.what();
  config_.offline = false;
  start();
  const std::string online = hf::download(config_, "org/tiny", "config.json", "main", options_);
  stop();
  config_.offline = true;
  EXPECT_EQ(hf::download(config_, "org/tiny", "config.json", "main", options_), online);
  EXPECT_EQ(hf::download(config_, "org/tiny", "config.json", kCommitA, options_), online);
  EXPECT_EQ(hub_error([&] { hf::download(config_, "org/tiny", "config.json", "v2", options_); }).kind(),
            HubError::Kind::Offline);
}

TEST_F(HubTest, NetworkFailureUsesTheCacheOrSaysWhy) {
  start();
  const std::string cached = hf::download(config_, "org/tiny", "config.json", "main", options_);
  const std::string endpoint = config_.endpoint;
  stop();  // the port is closed now: connection refused
  EXPECT_EQ(hf::download(config_, "org/tiny", "config.json", "main", options_), cached);
  const HubError e =
      hub_error([&] { hf::download(config_, "org/tiny", "tokenizer.json", "main", options_); });
  EXPECT_EQ(e.kind(), HubError::Kind::Network);
  EXPECT_TRUE(contains(e.what(), endpoint + "/org/tiny/resolve/main/tokenizer.json")) << e.what();
  EXPECT_TRUE(contains(e.what(), "not in the cache")) << e.what();
}

TEST_F(HubTest, HttpErrorsNameTheCause) {
  start();
  HubError e = hub_error([&] { hf::download(config_, "org/tiny", "absent.bin", "main", options_); });
  EXPECT_EQ(e.status(), 404);
  EXPECT_TRUE(contains(e.what(), "no such file")) << e.what();
  e = hub_error([&] { hf::download(config_, "org/nothing", "config.json", "main", options_); });
  EXPECT_TRUE(contains(e.what(), "no such repository")) << e.what();
  e = hub_error([&] { hf::download(config_, "org/tiny", "config.json", "v9", options_); });
  EXPECT_TRUE(contains(e.what(), "no such revision")) << e.what();
  start("401");
  e = hub_error([&] { hf::download(config_, "org/tiny", "config.json", "main", options_); });
  EXPECT_EQ(e.kind(), HubError::Kind::Http);
  EXPECT_EQ(e.status(), 401);
  EXPECT_TRUE(contains(e.what(), "HF_TOKEN")) << e.what();
  start("404");
  EXPECT_EQ(hub_error([&] { hf::download(config_, "org/tiny", "config.json", "main", options_); }).status(),
            404);
  // Nothing of a failed file reaches the cache.
  EXPECT_FALSE(fs::exists(repo_dir("org/tiny") / "snapshots"));
}

TEST_F(HubTest, TokenIsSentAsBearer) {
  start("normal", "hf_secret");
  EXPECT_EQ(hub_error([&] { hf::download(config_, "org/tiny", "config.json", "main", options_); }).status(),
            401);
  config_.token = "hf_secret";
  EXPECT_EQ(slurp(hf::download(config_, "org/tiny", "config.json", "main", options_)),
            R"({"hidden_size": 8})");
  // The LFS storage is another host: the token stays with the hub.
  clear_log();
  EXPECT_EQ(slurp(hf::download(config_, "org/tiny", "model.safetensors", "main", options_)), weights_);
  int storage_requests = 0;
  for (const std::string& l : requests()) {
    if (!contains(l, "/lfs/")) continue;
    ++storage_requests;
    EXPECT_EQ(l.substr(l.size() - 2), " -") << "token sent to the storage host: " << l;
  }
  EXPECT_EQ(storage_requests, 1);
}

TEST_F(HubTest, ModelSnapshotsComeFromOneCommit) {
  start();
  const hf::Snapshot s = hf::download_model(config_, "org/sharded", "main", options_);
  EXPECT_EQ(s.commit, kCommitB);
  EXPECT_EQ(fs::path(s.folder), repo_dir("org/sharded") / "snapshots" / kCommitB);
  EXPECT_EQ(s.files, (std::vector<std::string>{"config.json", "model.safetensors.index.json",
                                               "model-00001-of-00002.safetensors",
                                               "model-00002-of-00002.safetensors"}));
  for (const std::string& f : s.files)
    EXPECT_EQ(slurp(fs::path(s.folder) / f), slurp(root_ / "org" / "sharded" / kCommitB / f)) << f;
  const hf::Snapshot t = hf::download_model(config_, "org/tiny", "main", options_);
  EXPECT_EQ(t.files, (std::vector<std::string>{"config.json", "tokenizer.json", "model.safetensors"}));
  // After the first file every request names the commit, not the branch.
  for (const std::string& l : requests())
    if (contains(l, "/resolve/") && !contains(l, "config.json")) {
      EXPECT_TRUE(contains(l, "/resolve/" + kCommitA) || contains(l, "/resolve/" + kCommitB)) << l;
    }
}

TEST_F(HubTest, ProgressLinesWhenNotATerminal) {
  start();
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  options_.progress = hf::ProgressStyle::Auto;  // a file is not a terminal: plain lines
  options_.progress_out = out;
  hf::download(config_, "org/tiny", "model.safetensors", "main", options_);
  std::rewind(out);
  std::string text;
  for (int c; (c = std::fgetc(out)) != EOF;) text += static_cast<char>(c);
  std::fclose(out);
  EXPECT_TRUE(contains(text, "download model.safetensors: 256.1 kB")) << text;
  EXPECT_TRUE(contains(text, "download model.safetensors: 50%")) << text;
  EXPECT_TRUE(contains(text, "download model.safetensors: done")) << text;
  EXPECT_FALSE(contains(text, "\r")) << text;
}

TEST_F(HubTest, ArgumentsThatWouldEscapeTheCacheAreRefused) {
  EXPECT_THROW(hf::download(config_, "../etc", "config.json", "main", options_), ConfigError);
  EXPECT_THROW(hf::download(config_, "org/tiny", "../../x", "main", options_), ConfigError);
  EXPECT_THROW(hf::download(config_, "org/tiny", "/etc/passwd", "main", options_), ConfigError);
  EXPECT_THROW(hf::download(config_, "org/tiny", "config.json", "../main", options_), ConfigError);
  EXPECT_THROW(hf::download(config_, "a/b/c", "config.json", "main", options_), ConfigError);
  HubConfig none;
  EXPECT_THROW(hf::download(none, "org/tiny", "config.json", "main", options_), ConfigError);
}

// --- SHA-256
// --------------------------------------------------------------------------------------------------

TEST(Sha256, Fips180Vectors) {
  auto hex = [](const std::string& s) {
    return hf::sha256_hex(std::as_bytes(std::span(s.data(), s.size())));
  };
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmno"
                "pqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  hf::Sha256 million;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(chunk.data(), chunk.size());
  EXPECT_EQ(million.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Every length around the block and padding boundaries, fed in uneven pieces, against Python's hashlib.
TEST(Sha256, MatchesHashlibAcrossBlockBoundaries) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("sha_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> messages;
  for (size_t n : {1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4097})
    messages.push_back(random_bytes(n, uint32_t(n)));
  for (size_t i = 0; i < messages.size(); ++i) put(dir / std::to_string(i), messages[i]);
  const std::string out = (dir / "digests").string();
  const std::string cmd =
      "python3 -c \"import hashlib,sys; d=sys.argv[1]; n=int(sys.argv[2]); "
      "print('\\n'.join(hashlib.sha256(open(d+'/'+str(i),'rb').read()).hexdigest() for i in range(n)))\" " +
      dir.string() + " " + std::to_string(messages.size()) + " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out);
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string want;
    std::getline(in, want);
    hf::Sha256 h;
    const std::string& m = messages[i];
    for (size_t p = 0, step = 1; p < m.size(); p += step, step = step * 3 % 71 + 1)
      h.update(m.data() + p, std::min(step, m.size() - p));
    EXPECT_EQ(h.hex_digest(), want) << "length " << m.size();
    EXPECT_EQ(hf::sha256_file((dir / std::to_string(i)).string()), want);
  }
  fs::remove_all(dir);
}

}  // namespace
