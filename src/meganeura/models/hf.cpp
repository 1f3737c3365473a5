#include "meganeura/models/hf.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meganeura/config/config.hpp"
#include "meganeura/core/error.hpp"
#include "meganeura/formats/safetensors.hpp"
#include "meganeura/ir/storage.hpp"

namespace meganeura::models {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& what) {
  throw FormatError("[load_hf] '" + file + "'" + (field.empty() ? "" : ", field \"" + field + "\"") + ": " +
                    what);
}

json parse_object(std::string_view text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(origin, "", std::string("expected JSON, got a parse error: ") + e.what());
  }
  if (!j.is_object()) fail(origin, "", std::string("expected a JSON object, got ") + j.type_name());
  return j;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail(p.string(), "", "expected a readable file, got none");
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A present, non-null field.
const json* field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t int_field(const json& j, const char* key, const std::string& origin, std::optional<int64_t> fallback,
                  int64_t max) {
  const json* v = field(j, key);
  if (!v) {
    if (!fallback) fail(origin, key, "expected an integer, got none");
    return *fallback;
  }
  if (!v->is_number_integer()) fail(origin, key, std::string("expected an integer, got ") + v->type_name());
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(max) ? max + 1 : v->get<int64_t>();
  if (x <= 0 || x > max)
    fail(origin, key, "expected an integer in [1, " + std::to_string(max) + "], got " + v->dump());
  return x;
}

double number_field(const json& j, const char* key, const std::string& origin, double fallback) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number()) fail(origin, key, std::string("expected a number, got ") + v->type_name());
  const double x = v->get<double>();
  if (!(x > 0.0) || !std::isfinite(x))
    fail(origin, key, "expected a positive finite number, got " + v->dump());
  return x;
}

bool bool_field(const json& j, const char* key, const std::string& origin, bool fallback) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(origin, key, std::string("expected a boolean, got ") + v->type_name());
  return v->get<bool>();
}

// An id or a list of ids (eos_token_id may be either); none when absent or null.
std::vector<int32_t> ids_field(const json& j, const char* key, const std::string& origin, int64_t vocab) {
  const json* v = field(j, key);
  std::vector<int32_t> out;
  if (!v) return out;
  auto one = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab)
      fail(origin, key, "expected token ids in [0, " + std::to_string(vocab) + "), got " + v->dump());
    out.push_back(int32_t(x.get<int64_t>()));
  };
  if (v->is_array())
    for (const json& x : *v) one(x);
  else
    one(*v);
  return out;
}

// tokenizer_config.json's bos_token / eos_token: a string, or an AddedToken object {"content": ...}.
std::optional<std::string> token_field(const json& j, const char* key, const std::string& origin) {
  const json* v = field(j, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) {
    const json* c = field(*v, "content");
    if (c && c->is_string()) return c->get<std::string>();
  }
  fail(origin, key, std::string("expected a string or {\"content\": string}, got ") + v->type_name());
}

// A block's tensors: Hugging Face leaf -> ours (the table in llama.hpp).
constexpr std::pair<const char*, const char*> kLeaves[] = {
    {"input_layernorm.weight", "attn_norm.weight"},    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},      {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},       {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"}};

std::string blk(const std::string& n, const char* leaf) { return "blk." + n + "." + leaf; }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool looks_like_repo_id(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size() ||
      s.find('/', slash + 1) != std::string::npos)
    return false;
  if (s.find("..") != std::string::npos || s[0] == '.' || s[0] == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '-' || c == '_' || c == '.';
  });
}

// What `storage` keeps alive: the mapped checkpoint and the buffers of converted weights.
struct Storage {
  std::unique_ptr<SafetensorsModel> model;
  std::deque<std::vector<std::byte>> converted;
};

}  // namespace

LlamaConfig parse_hf_config(std::string_view json_text, const std::string& origin, std::string* architecture,
                            int64_t max_context) {
  const json j = parse_object(json_text, origin);
  std::string model_type;
  if (const json* m = field(j, "model_type")) {
    if (!m->is_string()) fail(origin, "model_type", std::string("expected a string, got ") + m->type_name());
    model_type = m->get<std::string>();
  }
  std::vector<std::string> archs;
  if (const json* a = field(j, "architectures")) {
    if (!a->is_array())
      fail(origin, "architectures", std::string("expected an array of strings, got ") + a->type_name());
    for (const json& x : *a) {
      if (!x.is_string()) fail(origin, "architectures", "expected an array of strings, got " + a->dump());
      archs.push_back(x.get<std::string>());
    }
  }
  const auto has = [&](const char* name) {
    return std::find(archs.begin(), archs.end(), name) != archs.end();
  };
  if (model_type == "qwen2" || has("Qwen2ForCausalLM"))
    fail(origin, "model_type",
         "expected a Llama-family model (LlamaForCausalLM), got Qwen2 (its q/k/v biases are not supported "
         "yet)");
  if (model_type != "llama" && !(model_type.empty() && has("LlamaForCausalLM")))
    fail(origin, "model_type",
         "expected \"llama\" (LlamaForCausalLM), got " +
             (model_type.empty() ? std::string("none") : "\"" + model_type + "\""));

  LlamaConfig c;
  constexpr int64_t kMaxSize = int64_t(1) << 20, kMaxVocab = int64_t(1) << 24;
  c.vocab = int_field(j, "vocab_size", origin, std::nullopt, kMaxVocab);
  c.hidden = int_field(j, "hidden_size", origin, std::nullopt, kMaxSize);
  c.layers = int_field(j, "num_hidden_layers", origin, std::nullopt, 4096);
  c.heads = int_field(j, "num_attention_heads", origin, std::nullopt, 4096);
  c.kv_heads = int_field(j, "num_key_value_heads", origin, c.heads, 4096);
  c.intermediate = int_field(j, "intermediate_size", origin, std::nullopt, kMaxSize);
  if (c.hidden % c.heads)
    fail(
        origin, "num_attention_heads",
        "expected a divisor of hidden_size " + std::to_string(c.hidden) + ", got " + std::to_string(c.heads));
  if (c.heads % c.kv_heads)
    fail(origin, "num_key_value_heads",
         "expected a divisor of num_attention_heads " + std::to_string(c.heads) + ", got " +
             std::to_string(c.kv_heads));
  if (c.head_dim() % 2)
    fail(origin, "hidden_size", "expected an even head dimension, got " + std::to_string(c.head_dim()));
  if (field(j, "head_dim") && int_field(j, "head_dim", origin, std::nullopt, kMaxSize) != c.head_dim())
    fail(origin, "head_dim",
         "expected hidden_size / num_attention_heads = " + std::to_string(c.head_dim()) +
             " (other head sizes are not supported), got " + j["head_dim"].dump());
  c.rope_theta = number_field(j, "rope_theta", origin, 10000.0);
  c.rms_eps = number_field(j, "rms_norm_eps", origin, 1e-6);  // LlamaConfig's defaults
  c.tied_embeddings = bool_field(j, "tie_word_embeddings", origin, false);
  if (const json* act = field(j, "hidden_act");
      act && !(act->is_string() && act->get<std::string>() == "silu"))
    fail(origin, "hidden_act", "expected \"silu\", got " + act->dump());
  if (const json* rs = field(j, "rope_scaling"))
    fail(origin, "rope_scaling", "expected null (RoPE scaling is not supported), got " + rs->dump());
  if (bool_field(j, "attention_bias", origin, false))
    fail(origin, "attention_bias", "expected false (attention biases are not supported), got true");
  if (bool_field(j, "mlp_bias", origin, false))
    fail(origin, "mlp_bias", "expected false (MLP biases are not supported), got true");
  const int64_t positions = int_field(j, "max_position_embeddings", origin, 2048, int64_t(1) << 24);
  c.max_context = max_context > 0 ? max_context : std::min<int64_t>(positions, 4096);
  if (architecture) *architecture = "llama";
  return c;
}

std::string hf_to_llama_name(const std::string& hf, const LlamaConfig& c) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return c.tied_embeddings ? "" : "output.weight";
  static const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 6) return "";
  const std::string n = hf.substr(prefix.size(), dot - prefix.size());
  if (!std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
      (n.size() > 1 && n[0] == '0'))
    return "";
  if (std::stoll(n) >= c.layers) return "";
  const std::string leaf = hf.substr(dot + 1);
  for (const auto& [from, to] : kLeaves)
    if (leaf == from) return blk(n, to);
  return "";
}

namespace {

LanguageModel load_folder(const fs::path& dir, const std::string& source, const HfOptions& o) {
  LanguageModel m;
  m.source = source;
  const fs::path config_path = dir / "config.json";
  if (!fs::is_regular_file(config_path)) fail(config_path.string(), "", "expected a file, got none");
  const std::string config_text = read_text(config_path);
  m.config = parse_hf_config(config_text, config_path.string(), &m.architecture, o.max_context);
  LlamaConfig& c = m.config;
  const json config_json = parse_object(config_text, config_path.string());

  auto storage = std::make_shared<Storage>();
  storage->model = std::make_unique<SafetensorsModel>(dir.string());
  const SafetensorsModel& st = *storage->model;
  const std::string& st_origin = st.origin();

  // Every tensor of the checkpoint maps to a parameter, or is one of the two kinds a loader may skip.
  std::map<std::string, std::string> hf_of;  // ours -> HF
  for (const std::string& name : st.names()) {
    const std::string ours = hf_to_llama_name(name, c);
    if (!ours.empty()) {
      hf_of[ours] = name;
      continue;
    }
    if (ends_with(name, ".rotary_emb.inv_freq") || (name == "lm_head.weight" && c.tied_embeddings)) continue;
    fail(st_origin, "",
         "tensor \"" + name + "\": expected a LlamaForCausalLM tensor of this config.json (" +
             std::to_string(c.layers) + " layers; names in models/llama.hpp), got an unknown name");
  }

  const auto params = llama_parameters(c);
  for (const auto& [ours, shape] : params) {
    const auto it = hf_of.find(ours);
    if (it == hf_of.end()) {
      std::string hf_name;  // the name that maps to `ours`
      for (const auto& [from, to] : kLeaves)
        if (ours.size() > std::string(to).size() && ends_with(ours, std::string(".") + to))
          hf_name = "model.layers." + ours.substr(4, ours.size() - 5 - std::string(to).size()) + "." + from;
      if (ours == "token_embd.weight") hf_name = "model.embed_tokens.weight";
      if (ours == "output_norm.weight") hf_name = "model.norm.weight";
      if (ours == "output.weight") hf_name = "lm_head.weight (tie_word_embeddings is false)";
      fail(st_origin, "", "expected tensor " + hf_name + " (parameter " + ours + "), got none");
    }
    const SafetensorsEntry& e = st.entry(it->second);
    if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16")
      fail(st.file_of(it->second).path(), "",
           "tensor \"" + it->second + "\": expected dtype F32, F16 or BF16, got " + e.dtype);
    if (e.shape != shape)
      fail(st.file_of(it->second).path(), "",
           "tensor \"" + it->second + "\": expected shape " + shape_str(shape) + " from config.json, got " +
               shape_str(e.shape));
    const SafetensorsView v = st.tensor(it->second);
    WeightView w{ours, v.dtype, v.shape, v.bytes};
    if (o.weight_dtype && *o.weight_dtype != v.dtype) {
      const std::vector<float> values = from_storage(v.bytes.data(), size_t(numel(v.shape)), v.dtype);
      storage->converted.push_back(to_storage(values, *o.weight_dtype));
      w.dtype = *o.weight_dtype;
      w.bytes = storage->converted.back();
    }
    m.weights.push_back(std::move(w));
  }
  c.weight_dtype = m.weights.front().dtype;  // token_embd.weight
  c.tensor_dtypes.clear();
  for (const WeightView& w : m.weights)
    if (w.dtype != c.weight_dtype) c.tensor_dtypes[w.name] = w.dtype;
  m.storage = storage;

  // Tokenizer and the ids a generator starts and stops with.
  const fs::path tok_path = dir / "tokenizer.json";
  if (fs::exists(tok_path)) {
    try {
      m.tokenizer = Tokenizer::load(tok_path.string());
    } catch (const DataError& e) {
      fail(tok_path.string(), "", e.what());
    }
    if (int64_t(m.tokenizer->vocab_size()) > c.vocab)
      fail(tok_path.string(), "",
           "expected at most vocab_size " + std::to_string(c.vocab) + " tokens (config.json), got " +
               std::to_string(m.tokenizer->vocab_size()));
  }
  auto token_id = [&](const std::string& token, const std::string& origin, const char* key) {
    if (!m.tokenizer)
      fail(origin, key, "expected tokenizer.json beside it to resolve \"" + token + "\", got none");
    const auto id = m.tokenizer->token_to_id(token);
    if (!id) fail(origin, key, "expected a token of tokenizer.json, got \"" + token + "\"");
    return *id;
  };

  std::vector<int32_t> bos = ids_field(config_json, "bos_token_id", config_path.string(), c.vocab);
  std::vector<int32_t> eos = ids_field(config_json, "eos_token_id", config_path.string(), c.vocab);
  const fs::path gen_path = dir / "generation_config.json";
  if (fs::exists(gen_path)) {
    const json g = parse_object(read_text(gen_path), gen_path.string());
    if (auto b = ids_field(g, "bos_token_id", gen_path.string(), c.vocab); !b.empty()) bos = b;
    if (auto e = ids_field(g, "eos_token_id", gen_path.string(), c.vocab); !e.empty()) eos = e;
  }
  const fs::path tc_path = dir / "tokenizer_config.json";
  if (fs::exists(tc_path)) {
    const json t = parse_object(read_text(tc_path), tc_path.string());
    const std::string origin = tc_path.string();
    if (auto b = token_field(t, "bos_token", origin)) bos = {token_id(*b, origin, "bos_token")};
    if (auto e = token_field(t, "eos_token", origin)) eos.push_back(token_id(*e, origin, "eos_token"));
    m.add_bos = bool_field(t, "add_bos_token", origin, false);
    if (const json* ct = field(t, "chat_template")) {
      if (ct->is_string()) {
        m.chat_template = ct->get<std::string>();
      } else if (ct->is_array()) {  // [{"name": ..., "template": ...}]: the one named "default"
        for (const json& x : *ct) {
          if (!x.is_object() || !x.contains("name") || !x["name"].is_string() || !x.contains("template") ||
              !x["template"].is_string())
            fail(origin, "chat_template",
                 "expected a string or a list of {\"name\", \"template\"} strings, got " + x.dump());
          if (x["name"] == "default") m.chat_template = x["template"].get<std::string>();
        }
      } else {
        fail(origin, "chat_template",
             std::string("expected a string or a list of templates, got ") + ct->type_name());
      }
    }
  }
  if (!bos.empty()) m.bos_id = bos.front();
  for (int32_t id : eos)
    if (std::find(m.eos_ids.begin(), m.eos_ids.end(), id) == m.eos_ids.end()) m.eos_ids.push_back(id);
  // A tokenizer whose post-processor already puts BOS first needs no second one.
  if (m.add_bos && m.tokenizer && m.bos_id >= 0) {
    const std::vector<int32_t> probe = m.tokenizer->encode("", {true, false});
    if (!probe.empty() && probe.front() == m.bos_id) m.add_bos = false;
  }
  if (m.add_bos && m.bos_id < 0)
    fail(tc_path.string(), "add_bos_token", "expected a bos token to add, got none");
  return m;
}

}  // namespace

LanguageModel load_hf(const std::string& source, const HfOptions& options) {
  if (source.empty()) throw FormatError("[load_hf] expected a model folder or a hub repository id, got \"\"");
  std::error_code ec;
  if (fs::exists(source, ec)) {
    if (!fs::is_directory(source, ec))
      throw FormatError(
          "[load_hf] expected a model folder (config.json, model.safetensors, tokenizer.json), got the file "
          "'" +
          source + "'");
    return load_folder(source, source, options);
  }
  if (!looks_like_repo_id(source))
    throw FormatError("[load_hf] expected an existing model folder or a hub repository id ORG/NAME, got '" +
                      source + "'");
  const hf::HubConfig hub = options.hub ? *options.hub : SessionConfig::from_env().hub;
  hf::Snapshot snap = hf::download_model(hub, source, options.revision, options.download);
  for (const char* f : {"tokenizer_config.json", "generation_config.json"}) {
    try {
      hf::download(hub, source, f, snap.commit, options.download);
    } catch (const HubError& e) {
      if (!((e.kind() == HubError::Kind::Http && e.status() == 404) || e.kind() == HubError::Kind::Offline))
        throw;
    }
  }
  return load_folder(snap.folder, source + "@" + snap.commit, options);
}

}  // namespace meganeura::models
