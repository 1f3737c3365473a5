// Building a Tokenizer: from tokenizer.json (Hugging Face `tokenizers`' serialisation) and from plain arrays
// (TokenizerData, as GGUF metadata carries them).
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "meganeura/core/error.hpp"
#include "meganeura/tokenizer/tokenizer.hpp"
#include "meganeura/tokenizer/tokenizer_impl.hpp"
#include "meganeura/tokenizer/unicode.hpp"

namespace meganeura {
namespace {

using json = nlohmann::json;

// The split patterns tokenizer.json may name, exactly as the model families write them.
const char* const kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Ids above this are refused: a vocabulary is a dense table, and a corrupt file must not make us allocate
// gigabytes.
constexpr int64_t kMaxId = 1 << 22;

struct Ctx {
  std::string source;
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw DataError("[Tokenizer::from_json] " + source + ": " + where + ": " + what);
  }
  const json& field(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) fail(where, "expected an object, got " + std::string(obj.type_name()));
    auto it = obj.find(key);
    if (it == obj.end()) fail(where, std::string("expected a field \"") + key + "\", got none");
    return *it;
  }
  std::string str(const json& obj, const char* key, const std::string& where) const {
    const json& v = field(obj, key, where);
    if (!v.is_string()) fail(where + "." + key, "expected a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  bool flag(const json& obj, const char* key, bool fallback, const std::string& where) const {
    if (!obj.is_object()) fail(where, "expected an object, got " + std::string(obj.type_name()));
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(where + "." + key, "expected a boolean, got " + std::string(it->type_name()));
    return it->get<bool>();
  }
  int32_t id(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) fail(where, "expected an integer id, got " + std::string(v.type_name()));
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x >= kMaxId)
      fail(where, "expected an id in [0, " + std::to_string(kMaxId) + "), got " + std::to_string(x));
    return static_cast<int32_t>(x);
  }
  std::string type(const json& obj, const std::string& where) const { return str(obj, "type", where); }
};

void parse_normalizer(const Ctx& c, const json& n, Tokenizer::Impl& m, const std::string& where) {
  if (n.is_null()) return;
  const std::string t = c.type(n, where);
  if (t == "Sequence") {
    const json& list = c.field(n, "normalizers", where);
    if (!list.is_array()) c.fail(where + ".normalizers", "expected an array");
    for (size_t k = 0; k < list.size(); ++k)
      parse_normalizer(c, list[k], m, where + ".normalizers[" + std::to_string(k) + "]");
  } else if (t == "Prepend") {
    m.normalizer.emplace_back(tok::NormStep::Prepend, c.str(n, "prepend", where));
  } else if (t == "Replace") {
    const json& pat = c.field(n, "pattern", where);
    if (!pat.is_object() || !pat.contains("String") || !pat["String"].is_string())
      c.fail(where + ".pattern", "expected a {\"String\": ...} pattern (regex patterns are not supported)");
    m.normalizer.emplace_back(tok::NormStep::Replace, pat["String"].get<std::string>(),
                              c.str(n, "content", where));
  } else {
    c.fail(where, "expected a normalizer of type Sequence, Prepend or Replace, got \"" + t + "\"");
  }
}

void parse_pre(const Ctx& c, const json& p, Tokenizer::Impl& m, const std::string& where) {
  if (p.is_null()) return;
  const std::string t = c.type(p, where);
  if (t == "Sequence") {
    const json& list = c.field(p, "pretokenizers", where);
    if (!list.is_array()) c.fail(where + ".pretokenizers", "expected an array");
    for (size_t k = 0; k < list.size(); ++k)
      parse_pre(c, list[k], m, where + ".pretokenizers[" + std::to_string(k) + "]");
  } else if (t == "ByteLevel") {
    tok::PreStep s(tok::PreStep::ByteLevel);
    s.add_prefix_space = c.flag(p, "add_prefix_space", true, where);
    s.use_regex = c.flag(p, "use_regex", true, where);
    m.pre.push_back(s);
    m.byte_level = true;
  } else if (t == "Digits") {
    tok::PreStep s(tok::PreStep::Digits);
    s.individual = c.flag(p, "individual_digits", false, where);
    m.pre.push_back(s);
  } else if (t == "Split") {
    const json& pat = c.field(p, "pattern", where);
    std::string regex;
    if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string())
      regex = pat["Regex"].get<std::string>();
    tok::PreStep s(tok::PreStep::Split);
    if (regex == kGpt2Regex)
      s.pattern = tok::SplitPattern::Gpt2;
    else if (regex == kLlama3Regex)
      s.pattern = tok::SplitPattern::Llama3;
    else if (regex == kQwen2Regex)
      s.pattern = tok::SplitPattern::Qwen2;
    else
      c.fail(where + ".pattern", "expected the GPT-2, Llama-3 or Qwen2 split regex, got " + pat.dump());
    const std::string behavior = c.str(p, "behavior", where);
    if (behavior != "Isolated")
      c.fail(where + ".behavior", "expected \"Isolated\", got \"" + behavior + "\"");
    if (c.flag(p, "invert", false, where)) c.fail(where + ".invert", "expected false, got true");
    m.pre.push_back(s);
  } else {
    c.fail(where, "expected a pre-tokenizer of type Sequence, ByteLevel, Digits or Split, got \"" + t + "\"");
  }
}

void parse_decoder(const Ctx& c, const json& d, Tokenizer::Impl& m, const std::string& where) {
  if (d.is_null()) return;
  m.has_decoder = true;
  const std::string t = c.type(d, where);
  if (t == "Sequence") {
    const json& list = c.field(d, "decoders", where);
    if (!list.is_array()) c.fail(where + ".decoders", "expected an array");
    for (size_t k = 0; k < list.size(); ++k)
      parse_decoder(c, list[k], m, where + ".decoders[" + std::to_string(k) + "]");
  } else if (t == "ByteLevel") {
    m.decoder.emplace_back(tok::DecStep::ByteLevel);
  } else if (t == "ByteFallback") {
    m.decoder.emplace_back(tok::DecStep::ByteFallback);
  } else if (t == "Fuse") {
    m.decoder.emplace_back(tok::DecStep::Fuse);
  } else if (t == "Replace") {
    const json& pat = c.field(d, "pattern", where);
    if (!pat.is_object() || !pat.contains("String") || !pat["String"].is_string())
      c.fail(where + ".pattern", "expected a {\"String\": ...} pattern (regex patterns are not supported)");
    m.decoder.emplace_back(tok::DecStep::Replace, pat["String"].get<std::string>(),
                           c.str(d, "content", where));
  } else if (t == "Strip") {
    tok::DecStep s(tok::DecStep::Strip);
    s.a = c.str(d, "content", where);
    uint32_t cp;
    if (s.a.empty() || tok::decode_utf8(reinterpret_cast<const unsigned char*>(s.a.data()), s.a.size(), cp) !=
                           static_cast<int>(s.a.size()))
      c.fail(where + ".content", "expected one character, got \"" + s.a + "\"");
    const json& start = c.field(d, "start", where);
    const json& stop = c.field(d, "stop", where);
    if (!start.is_number_unsigned() || !stop.is_number_unsigned())
      c.fail(where, "expected unsigned start and stop");
    s.start = start.get<size_t>();
    s.stop = stop.get<size_t>();
    m.decoder.push_back(s);
  } else {
    c.fail(where,
           "expected a decoder of type Sequence, ByteLevel, ByteFallback, Fuse, Replace or Strip, got \"" +
               t + "\"");
  }
}

void parse_post(const Ctx& c, const json& p, Tokenizer::Impl& m, const std::string& where) {
  if (p.is_null()) return;
  const std::string t = c.type(p, where);
  if (t == "Sequence") {
    const json& list = c.field(p, "processors", where);
    if (!list.is_array()) c.fail(where + ".processors", "expected an array");
    for (size_t k = 0; k < list.size(); ++k)
      parse_post(c, list[k], m, where + ".processors[" + std::to_string(k) + "]");
  } else if (t == "ByteLevel") {
    // offsets only
  } else if (t == "TemplateProcessing") {
    const json& single = c.field(p, "single", where);
    const json& specials = c.field(p, "special_tokens", where);
    if (!single.is_array()) c.fail(where + ".single", "expected an array");
    bool seen_a = false;
    for (size_t k = 0; k < single.size(); ++k) {
      const std::string w = where + ".single[" + std::to_string(k) + "]";
      const json& item = single[k];
      if (item.is_object() && item.contains("Sequence")) {
        if (seen_a) c.fail(w, "expected one $A sequence, got a second");
        seen_a = true;
        continue;
      }
      if (!item.is_object() || !item.contains("SpecialToken"))
        c.fail(w, "expected a Sequence or SpecialToken item");
      const std::string name = c.str(item["SpecialToken"], "id", w + ".SpecialToken");
      const json& entry = c.field(specials, name.c_str(), where + ".special_tokens");
      const json& ids = c.field(entry, "ids", where + ".special_tokens." + name);
      if (!ids.is_array()) c.fail(where + ".special_tokens." + name + ".ids", "expected an array");
      for (const auto& id : ids)
        (seen_a ? m.suffix_ids : m.prefix_ids).push_back(c.id(id, where + ".special_tokens." + name));
    }
    if (!seen_a) c.fail(where + ".single", "expected a $A sequence, got none");
  } else {
    c.fail(where,
           "expected a post-processor of type Sequence, ByteLevel or TemplateProcessing, got \"" + t + "\"");
  }
}

void set_vocab_entry(Tokenizer::Impl& m, const std::string& text, int32_t id) {
  if (static_cast<size_t>(id) >= m.vocab.size()) m.vocab.resize(static_cast<size_t>(id) + 1);
  m.vocab[static_cast<size_t>(id)] = text;
  m.token_to_id[text] = id;
}

void fill_byte_tokens(Tokenizer::Impl& m) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = m.token_to_id.find(std::string_view(name));
    m.byte_tokens[static_cast<size_t>(b)] = it == m.token_to_id.end() ? -1 : it->second;
  }
}

// Adds merge (left, right) at `rank`; a later duplicate replaces an earlier one, as in `tokenizers`.
void add_merge(Tokenizer::Impl& m, const std::string& left, const std::string& right, int32_t rank,
               const std::function<void(const std::string&)>& fail) {
  auto a = m.token_to_id.find(left), b = m.token_to_id.find(right);
  if (a == m.token_to_id.end()) fail("expected a token of the vocabulary, got \"" + left + "\"");
  if (b == m.token_to_id.end()) fail("expected a token of the vocabulary, got \"" + right + "\"");
  auto merged = m.token_to_id.find(left + right);
  if (merged == m.token_to_id.end())
    fail("expected the merged token \"" + left + right + "\" in the vocabulary, got none");
  m.merges[static_cast<uint64_t>(static_cast<uint32_t>(a->second)) << 32 | static_cast<uint32_t>(b->second)] =
      {rank, merged->second};
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  Ctx c{source};
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    c.fail("document", std::string("expected JSON, got a parse error: ") + e.what());
  }
  if (!doc.is_object()) c.fail("document", "expected an object, got " + std::string(doc.type_name()));
  auto m = std::make_unique<Impl>();
  m->source = source;
  m->kind = Impl::Kind::Bpe;

  const json& model = c.field(doc, "model", "document");
  if (!model.is_object()) c.fail("model", "expected an object");
  if (model.contains("type") && !(model["type"].is_string() && model["type"] == "BPE"))
    c.fail("model.type", "expected \"BPE\", got " + model["type"].dump());
  if (model.contains("dropout") && !model["dropout"].is_null())
    c.fail("model.dropout", "expected null (dropout is not supported)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && !(model[key].is_string() && model[key] == ""))
      c.fail(std::string("model.") + key, "expected null (not supported), got " + model[key].dump());
  if (doc.contains("truncation") && !doc["truncation"].is_null())
    c.fail("truncation", "expected null (truncation is not supported)");

  const json& vocab = c.field(model, "vocab", "model");
  if (!vocab.is_object()) c.fail("model.vocab", "expected an object of token -> id");
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    max_id = std::max<int64_t>(max_id, c.id(it.value(), "model.vocab[\"" + it.key() + "\"]"));
  if (max_id >= 16 * static_cast<int64_t>(vocab.size()) + 1024)
    c.fail("model.vocab", "expected dense ids, got id " + std::to_string(max_id) + " for " +
                              std::to_string(vocab.size()) + " tokens");
  for (auto it = vocab.begin(); it != vocab.end(); ++it)
    set_vocab_entry(*m, it.key(), it.value().get<int32_t>());
  fill_byte_tokens(*m);
  m->byte_fallback = c.flag(model, "byte_fallback", false, "model");
  m->fuse_unk = c.flag(model, "fuse_unk", false, "model");
  m->ignore_merges = c.flag(model, "ignore_merges", false, "model");
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string unk = c.str(model, "unk_token", "model");
    auto it = m->token_to_id.find(unk);
    if (it == m->token_to_id.end())
      c.fail("model.unk_token", "expected a token of the vocabulary, got \"" + unk + "\"");
    m->unk_id = it->second;
  }
  const json& merges = c.field(model, "merges", "model");
  if (!merges.is_array()) c.fail("model.merges", "expected an array");
  for (size_t k = 0; k < merges.size(); ++k) {
    const std::string where = "model.merges[" + std::to_string(k) + "]";
    const json& e = merges[k];
    std::string left, right;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        c.fail(where, "expected \"left right\", got \"" + s + "\"");
      left = s.substr(0, sp), right = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>(), right = e[1].get<std::string>();
    } else {
      c.fail(where, "expected a pair of strings, got " + e.dump());
    }
    add_merge(*m, left, right, static_cast<int32_t>(k),
              [&](const std::string& what) { c.fail(where, what); });
  }

  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    const json& list = doc["added_tokens"];
    if (!list.is_array()) c.fail("added_tokens", "expected an array");
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string where = "added_tokens[" + std::to_string(k) + "]";
      const json& e = list[k];
      tok::AddedToken t;
      t.id = c.id(c.field(e, "id", where), where + ".id");
      t.content = c.str(e, "content", where);
      t.special = c.flag(e, "special", false, where);
      t.normalized = c.flag(e, "normalized", !t.special, where);
      t.lstrip = c.flag(e, "lstrip", false, where);
      t.rstrip = c.flag(e, "rstrip", false, where);
      t.single_word = c.flag(e, "single_word", false, where);
      if (t.content.empty()) continue;  // `tokenizers` ignores these
      m->added.push_back(std::move(t));
    }
  }

  if (doc.contains("normalizer")) parse_normalizer(c, doc["normalizer"], *m, "normalizer");
  if (doc.contains("pre_tokenizer")) parse_pre(c, doc["pre_tokenizer"], *m, "pre_tokenizer");
  for (size_t k = 0; k + 1 < m->pre.size(); ++k)
    if (m->pre[k].kind == tok::PreStep::ByteLevel)
      c.fail("pre_tokenizer", "expected ByteLevel as the last pre-tokenizer, got it at position " +
                                  std::to_string(k) + " of " + std::to_string(m->pre.size()));
  if (doc.contains("post_processor")) parse_post(c, doc["post_processor"], *m, "post_processor");
  if (doc.contains("decoder")) parse_decoder(c, doc["decoder"], *m, "decoder");
  if (!m->prefix_ids.empty()) m->bos = m->prefix_ids.front();
  if (!m->suffix_ids.empty()) m->eos = m->suffix_ids.back();
  m->build_added();
  return Tokenizer(std::move(m));
}

std::vector<std::string> pre_tokenizer_names() {
  return {"gpt-2", "gpt2", "smollm", "starcoder", "refact", "codeshell", "llama3", "llama-bpe", "qwen2"};
}

Tokenizer Tokenizer::from_data(const TokenizerData& d) {
  auto fail = [](const std::string& what) -> void { throw DataError("[Tokenizer::from_data] " + what); };
  const size_t n = d.tokens.size();
  if (n == 0) fail("expected tokens, got none");
  if (n >= static_cast<size_t>(kMaxId))
    fail("expected fewer than " + std::to_string(kMaxId) + " tokens, got " + std::to_string(n));
  if (!d.token_types.empty() && d.token_types.size() != n)
    fail("expected one token type per token (" + std::to_string(n) + "), got " +
         std::to_string(d.token_types.size()));
  for (const auto& [name, id] :
       {std::pair{"bos_id", d.bos_id}, {"eos_id", d.eos_id}, {"unk_id", d.unk_id}, {"pad_id", d.pad_id}})
    if (id < -1 || id >= static_cast<int64_t>(n))
      fail(std::string("expected ") + name + " in [-1, " + std::to_string(n) + "), got " +
           std::to_string(id));
  if ((d.add_bos && d.bos_id < 0) || (d.add_eos && d.eos_id < 0))
    fail("expected a bos/eos id where add_bos/add_eos is set");

  auto m = std::make_unique<Impl>();
  m->source = "tokenizer data";
  m->vocab.resize(n);
  for (size_t i = 0; i < n; ++i) {
    m->vocab[i] = d.tokens[i];
    m->token_to_id[d.tokens[i]] = static_cast<int32_t>(i);  // a later duplicate wins, as in llama.cpp
  }
  fill_byte_tokens(*m);
  for (size_t i = 0; i < d.token_types.size(); ++i) {
    const int32_t t = d.token_types[i];
    if (t < 1 || t > 6)
      fail("token_types[" + std::to_string(i) + "]: expected 1..6, got " + std::to_string(t));
    // llama.cpp matches unknown, control and user-defined tokens in text; user-defined ones even when special
    // tokens are not parsed
    if (t == TokenizerData::Unknown || t == TokenizerData::Control || t == TokenizerData::UserDefined) {
      tok::AddedToken a;
      a.content = d.tokens[i];
      a.id = static_cast<int32_t>(i);
      a.special = t != TokenizerData::UserDefined;
      if (!a.content.empty()) m->added.push_back(std::move(a));
    }
  }
  m->bos = d.bos_id;
  m->eos = d.eos_id;
  if (d.add_bos) m->prefix_ids.push_back(d.bos_id);
  if (d.add_eos) m->suffix_ids.push_back(d.eos_id);
  m->has_decoder = true;

  if (d.model == TokenizerData::Model::Spm) {
    m->kind = Impl::Kind::Spm;
    if (d.scores.size() != n)
      fail("expected one score per token (" + std::to_string(n) + "), got " +
           std::to_string(d.scores.size()));
    m->scores = d.scores;
    m->unk_id = d.unk_id;
    m->add_space_prefix = d.add_space_prefix;
    // the decoder `tokenizers` gets from the Llama conversion
    m->decoder.emplace_back(tok::DecStep::Replace, "\xE2\x96\x81", " ");
    m->decoder.emplace_back(tok::DecStep::ByteFallback);
    m->decoder.emplace_back(tok::DecStep::Fuse);
    if (d.add_space_prefix) {
      tok::DecStep strip(tok::DecStep::Strip, " ");
      strip.start = 1;
      m->decoder.push_back(strip);
    }
  } else {
    m->kind = Impl::Kind::Bpe;
    m->byte_level = true;
    tok::PreStep bl(tok::PreStep::ByteLevel);
    bl.add_prefix_space = false;
    const std::string& pre = d.pre;
    if (pre == "gpt-2" || pre == "gpt2") {
      m->pre.push_back(bl);
    } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell") {
      tok::PreStep digits(tok::PreStep::Digits);
      digits.individual = true;
      m->pre.push_back(digits);
      m->pre.push_back(bl);
    } else if (pre == "llama3" || pre == "llama-bpe" || pre == "qwen2") {
      tok::PreStep split(tok::PreStep::Split);
      split.pattern = pre == "qwen2" ? tok::SplitPattern::Qwen2 : tok::SplitPattern::Llama3;
      m->pre.push_back(split);
      bl.use_regex = false;
      m->pre.push_back(bl);
      m->ignore_merges = pre != "qwen2";
    } else {
      std::string names;
      for (const auto& s : pre_tokenizer_names()) names += (names.empty() ? "" : ", ") + s;
      fail("pre: expected one of " + names + ", got \"" + pre + "\"");
    }
    m->decoder.emplace_back(tok::DecStep::ByteLevel);
    for (size_t k = 0; k < d.merges.size(); ++k) {
      const std::string& s = d.merges[k];
      const size_t sp = s.find(' ', 1);  // llama.cpp: a merge's left side is never empty
      if (sp == std::string::npos)
        fail("merges[" + std::to_string(k) + "]: expected \"left right\", got \"" + s + "\"");
      add_merge(*m, s.substr(0, sp), s.substr(sp + 1), static_cast<int32_t>(k),
                [&](const std::string& what) { fail("merges[" + std::to_string(k) + "]: " + what); });
    }
  }
  m->build_added();
  return Tokenizer(std::move(m));
}

}  // namespace meganeura
