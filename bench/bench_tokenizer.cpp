// Tokenizer encode speed on one core, and the real-model check of scripts/tokenizer_real_model.py.
//   bench_tokenizer --json tokenizer.json --bench TEXT_FILE [--repeat N]
//   bench_tokenizer --data data.json --bench TEXT_FILE        (TokenizerData as scripts/gguf_tokenizer.py
//   writes it) bench_tokenizer --json tokenizer.json --verify EXPECTED.json CORPUS.json
// --bench encodes the whole file as one string (special tokens not parsed): the first pass starts with an
// empty word cache, later passes reuse it; MB/s = file bytes / seconds, of thread CPU time and of wall time.
// --verify compares ids and decoded text with what `tokenizers` gave (the layout of
// tests/oracle/tokenizer_oracle.py) and exits 1 on any difference.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "meganeura/core/error.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"

using namespace meganeura;
using json = nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TokenizerData data_of(const json& j) {
  TokenizerData d;
  d.model = j.at("model") == "llama" ? TokenizerData::Model::Spm : TokenizerData::Model::Bpe;
  d.tokens = j.at("tokens").get<std::vector<std::string>>();
  d.scores = j.at("scores").get<std::vector<float>>();
  d.token_types = j.at("token_types").get<std::vector<int32_t>>();
  d.merges = j.at("merges").get<std::vector<std::string>>();
  d.pre = j.at("pre").get<std::string>();
  d.bos_id = j.at("bos_id"), d.eos_id = j.at("eos_id"), d.unk_id = j.at("unk_id"), d.pad_id = j.at("pad_id");
  d.add_bos = j.at("add_bos"), d.add_eos = j.at("add_eos"), d.add_space_prefix = j.at("add_space_prefix");
  return d;
}

// CPU time of this thread: on a shared machine wall time measures the neighbours too.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int32_t k_of(const std::vector<int32_t>& v, size_t k) { return k < v.size() ? v[k] : -1; }

int usage() {
  std::cerr << "usage: bench_tokenizer (--json tokenizer.json | --data data.json) "
               "(--bench TEXT [--repeat N] | --verify EXPECTED.json CORPUS.json)\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, data_path, bench_path, expected_path, corpus_path;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--json")
      json_path = next();
    else if (a == "--data")
      data_path = next();
    else if (a == "--bench")
      bench_path = next();
    else if (a == "--repeat")
      repeat = std::stoi(next());
    else if (a == "--verify")
      expected_path = next(), corpus_path = next();
    else
      return usage();
  }
  if (json_path.empty() == data_path.empty() || bench_path.empty() == expected_path.empty()) return usage();
  try {
    auto t0 = std::chrono::steady_clock::now();
    const Tokenizer tok = json_path.empty() ? Tokenizer::from_data(data_of(json::parse(read_file(data_path))))
                                            : Tokenizer::load(json_path);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("loaded %zu tokens in %.3f s\n", tok.vocab_size(), load_s);
    if (!bench_path.empty()) {
      const std::string text = read_file(bench_path);
      for (int r = 0; r < repeat; ++r) {
        t0 = std::chrono::steady_clock::now();
        const double c0 = thread_seconds();
        const auto ids = tok.encode(text, {.add_special = false, .parse_special = false});
        const double cpu = thread_seconds() - c0;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf(
            "pass %d: %zu bytes -> %zu tokens: %.1f MB/s of thread CPU time (%.3f s), %.1f MB/s wall%s\n", r,
            text.size(), ids.size(), text.size() / cpu / 1e6, cpu, text.size() / s / 1e6,
            r == 0 ? " (empty word cache)" : "");
      }
      return 0;
    }
    const json want = json::parse(read_file(expected_path));
    const json corpus = json::parse(read_file(corpus_path));
    size_t bad = 0;
    for (size_t i = 0; i < corpus.size(); ++i) {
      const std::string text = corpus[i];
      const auto ids = tok.encode(text);
      const auto want_ids = want.at("ids")[i].get<std::vector<int32_t>>();
      const bool ids_ok = ids == want_ids;
      const std::string got = tok.decode(want_ids), want_text = want.at("decoded")[i].get<std::string>();
      if ((!ids_ok || got != want_text) && ++bad <= 10) {
        // where they part, with a little context (whole strings can be megabytes)
        size_t at = 0;
        if (ids_ok) {
          while (at < got.size() && at < want_text.size() && got[at] == want_text[at]) ++at;
        } else {
          size_t k = 0;
          while (k < ids.size() && k < want_ids.size() && ids[k] == want_ids[k]) ++k;
          at = k;
        }
        auto around = [&](const std::string& s) {
          return json(s.substr(at > 40 ? at - 40 : 0, 80))
              .dump(-1, ' ', false, json::error_handler_t::replace);
        };
        std::printf("differs (%s) in string %zu at %s %zu: ours %s, tokenizers %s\n",
                    ids_ok ? "decode" : "ids", i, ids_ok ? "byte" : "token", at,
                    ids_ok ? around(got).c_str() : std::to_string(k_of(ids, at)).c_str(),
                    ids_ok ? around(want_text).c_str() : std::to_string(k_of(want_ids, at)).c_str());
      }
    }
    std::printf("%zu strings, %zu differ\n", corpus.size(), bad);
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
}
