#include "model/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace evt::model {

using nlohmann::json;

namespace {

struct ArchitectureNames {
  Architecture arch;
  std::string_view name, hf_name, family;
};
constexpr ArchitectureNames kArchitectures[] = {
    {Architecture::kQwen3, "qwen3", "Qwen3ForCausalLM", "qwen3"},
    {Architecture::kLlama, "llama", "LlamaForCausalLM", "llama"},
    {Architecture::kQwen3Moe, "qwen3_moe", "Qwen3MoeForCausalLM", "qwen3"},
};

const ArchitectureNames& names_of(Architecture arch) {
  for (const ArchitectureNames& a : kArchitectures) {
    if (a.arch == arch) return a;
  }
  return kArchitectures[0];
}

}  // namespace

std::string_view architecture_name(Architecture arch) { return names_of(arch).name; }
std::string_view hf_architecture_name(Architecture arch) { return names_of(arch).hf_name; }
std::string_view architecture_family(Architecture arch) { return names_of(arch).family; }

std::optional<Architecture> parse_architecture_name(std::string_view name) {
  for (const ArchitectureNames& a : kArchitectures) {
    if (name == a.name) return a.arch;
  }
  return std::nullopt;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  if (!moe || moe->num_experts <= 0 || moe->decoder_sparse_step <= 0) return false;
  for (int64_t dense : moe->mlp_only_layers) {
    if (dense == layer) return false;
  }
  return (layer + 1) % moe->decoder_sparse_step == 0;
}

bool ModelConfig::has_moe_layers() const {
  for (int64_t l = 0; l < num_layers; ++l) {
    if (is_moe_layer(l)) return true;
  }
  return false;
}

bool ModelConfig::has_dense_layers() const {
  for (int64_t l = 0; l < num_layers; ++l) {
    if (!is_moe_layer(l)) return true;
  }
  return false;
}

namespace {

const char* json_type_name(const json& value) { return value.is_number_integer() ? "integer" : value.type_name(); }

// Typed access to one JSON object's keys, with errors that name the file and the key path.
class Fields {
 public:
  Fields(const json& object, const std::string& source, std::string scope = "")
      : object_(object), source_(source), scope_(std::move(scope)) {}

  // A key set to null counts as absent, as it does for transformers.
  bool has(const char* key) const { return object_.contains(key) && !object_[key].is_null(); }
  const json& at(const char* key) const { return object_[key]; }

  Status missing(const char* key) const { return error("{}: missing key '{}{}'", source_, scope_, key); }
  Status wrong_type(const char* key, const char* expected) const {
    return error("{}: key '{}{}' must be {}, got {} ({})", source_, scope_, key, expected, object_[key].dump(),
                 json_type_name(object_[key]));
  }

  Expected<int64_t> integer(const char* key) const {
    if (!has(key)) return missing(key);
    if (!object_[key].is_number_integer()) return wrong_type(key, "an integer");
    return object_[key].get<int64_t>();
  }
  Expected<int64_t> integer_or(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }

  Expected<double> number(const char* key) const {
    if (!has(key)) return missing(key);
    if (!object_[key].is_number()) return wrong_type(key, "a number");
    return object_[key].get<double>();
  }
  Expected<double> number_or(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }

  Expected<bool> boolean_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!object_[key].is_boolean()) return wrong_type(key, "true or false");
    return object_[key].get<bool>();
  }

  Expected<std::vector<int64_t>> integer_list_or(const char* key, std::vector<int64_t> fallback) const {
    if (!has(key)) return fallback;
    if (!object_[key].is_array()) return wrong_type(key, "a list of integers");
    std::vector<int64_t> out;
    for (const json& v : object_[key]) {
      if (!v.is_number_integer()) return wrong_type(key, "a list of integers");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }

  Expected<std::string> string_or(const char* key, std::string fallback) const {
    if (!has(key)) return fallback;
    if (!object_[key].is_string()) return wrong_type(key, "a string");
    return object_[key].get<std::string>();
  }

 private:
  const json& object_;
  const std::string& source_;
  std::string scope_;
};

Expected<Architecture> read_architecture(const Fields& f, const std::string& source) {
  if (!f.has("architectures")) return f.missing("architectures");
  const json& list = f.at("architectures");
  if (!list.is_array() || list.empty() || !list[0].is_string()) {
    return f.wrong_type("architectures", "a list of class names");
  }
  const std::string name = list[0].get<std::string>();
  std::string supported;
  for (const ArchitectureNames& a : kArchitectures) {
    if (name == a.hf_name) return a.arch;
    supported += (supported.empty() ? "" : ", ") + std::string(a.hf_name);
  }
  return error("{}: {} is not supported yet (supported: {})", source, name, supported);
}

// Qwen3-MoE's sparse-block keys. transformers 4.x writes num_experts; 5.x renames it
// num_local_experts (and still reads the old name), so either is taken.
Status read_moe(const Fields& f, ModelConfig& c) {
  MoeConfig m;
  const char* experts_key = f.has("num_experts") || !f.has("num_local_experts") ? "num_experts" : "num_local_experts";
  EVT_ASSIGN_OR_RETURN(m.num_experts, f.integer(experts_key));
  EVT_ASSIGN_OR_RETURN(m.num_experts_per_tok, f.integer("num_experts_per_tok"));
  EVT_ASSIGN_OR_RETURN(m.moe_intermediate_size, f.integer("moe_intermediate_size"));
  EVT_ASSIGN_OR_RETURN(m.norm_topk_prob, f.boolean_or("norm_topk_prob", false));
  EVT_ASSIGN_OR_RETURN(m.decoder_sparse_step, f.integer_or("decoder_sparse_step", 1));
  EVT_ASSIGN_OR_RETURN(m.mlp_only_layers, f.integer_list_or("mlp_only_layers", {}));
  c.moe = std::move(m);
  return Status();
}

// Features these architectures' configs can switch on that the engine does not implement;
// loading such a model would silently compute something else.
Status refuse_unsupported_features(const Fields& f, const std::string& source) {
  for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"}) {
    EVT_ASSIGN_OR_RETURN(const bool on, f.boolean_or(key, false));
    if (on) return error("{}: '{}: true' is not supported yet", source, key);
  }
  EVT_ASSIGN_OR_RETURN(const std::string act, f.string_or("hidden_act", "silu"));
  if (act != "silu") return error("{}: hidden_act '{}' is not supported yet (only silu)", source, act);
  return Status();
}

// Reads rope_theta and the scaling. transformers up to 4.x writes "rope_theta" and "rope_scaling"
// (rope type under "rope_type", or "type" in older files); 5.x writes both into "rope_parameters".
Status read_rope(const Fields& f, const std::string& source, ModelConfig& c) {
  const char* scaling_key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (f.has(scaling_key) && !f.at(scaling_key).is_object()) return f.wrong_type(scaling_key, "an object");
  static const json kEmpty = json::object();
  const Fields rope(f.has(scaling_key) ? f.at(scaling_key) : kEmpty, source, std::string(scaling_key) + ".");

  if (f.has("rope_theta") || !f.has("rope_parameters")) {
    EVT_ASSIGN_OR_RETURN(c.rope_theta, f.number("rope_theta"));
  } else {
    EVT_ASSIGN_OR_RETURN(c.rope_theta, rope.number("rope_theta"));
  }
  EVT_ASSIGN_OR_RETURN(const std::string legacy_type, rope.string_or("type", "default"));
  EVT_ASSIGN_OR_RETURN(const std::string type, rope.string_or("rope_type", legacy_type));
  if (type == "default") return Status();
  if (type != "llama3") {
    return error("{}: {} rope_type '{}' is not supported yet (supported: default, llama3)", source, scaling_key, type);
  }
  Llama3RopeScaling s;
  EVT_ASSIGN_OR_RETURN(s.factor, rope.number("factor"));
  EVT_ASSIGN_OR_RETURN(s.low_freq_factor, rope.number("low_freq_factor"));
  EVT_ASSIGN_OR_RETURN(s.high_freq_factor, rope.number("high_freq_factor"));
  EVT_ASSIGN_OR_RETURN(s.original_max_position_embeddings, rope.integer("original_max_position_embeddings"));
  c.rope_scaling = s;
  return Status();
}

Status read_token_ids(const Fields& f, ModelConfig& c) {
  if (f.has("bos_token_id")) {
    EVT_ASSIGN_OR_RETURN(c.bos_token_id, f.integer("bos_token_id"));
  }
  if (!f.has("eos_token_id")) return Status();
  const json& eos = f.at("eos_token_id");
  if (eos.is_number_integer()) {
    c.eos_token_ids = {eos.get<int64_t>()};
    return Status();
  }
  if (!eos.is_array()) return f.wrong_type("eos_token_id", "an integer or a list of integers");
  for (const json& id : eos) {
    if (!id.is_number_integer()) return f.wrong_type("eos_token_id", "an integer or a list of integers");
    c.eos_token_ids.push_back(id.get<int64_t>());
  }
  return Status();
}

}  // namespace

Expected<ModelConfig> parse_config(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    return error("{}: not valid JSON: {}", source, e.what());
  }
  if (!root.is_object()) return error("{}: expected a JSON object, got {}", source, root.type_name());
  const Fields f(root, source);

  ModelConfig c;
  EVT_ASSIGN_OR_RETURN(c.architecture, read_architecture(f, source));
  EVT_RETURN_IF_ERROR(refuse_unsupported_features(f, source));
  EVT_ASSIGN_OR_RETURN(c.hidden_size, f.integer("hidden_size"));
  EVT_ASSIGN_OR_RETURN(c.intermediate_size, f.integer("intermediate_size"));
  EVT_ASSIGN_OR_RETURN(c.num_layers, f.integer("num_hidden_layers"));
  EVT_ASSIGN_OR_RETURN(c.num_heads, f.integer("num_attention_heads"));
  EVT_ASSIGN_OR_RETURN(c.num_kv_heads, f.integer("num_key_value_heads"));
  EVT_ASSIGN_OR_RETURN(c.vocab_size, f.integer("vocab_size"));
  EVT_ASSIGN_OR_RETURN(c.max_position_embeddings, f.integer("max_position_embeddings"));
  EVT_ASSIGN_OR_RETURN(c.rms_norm_eps, f.number("rms_norm_eps"));
  if (c.architecture != Architecture::kLlama) {
    EVT_ASSIGN_OR_RETURN(c.head_dim, f.integer("head_dim"));
  } else {
    // Llama configs before 3.2 have no head_dim; transformers then derives it.
    if (c.num_heads > 0 && !f.has("head_dim") && c.hidden_size % c.num_heads != 0) {
      return error("{}: no head_dim, and hidden_size {} is not divisible by num_attention_heads {}", source,
                   c.hidden_size, c.num_heads);
    }
    EVT_ASSIGN_OR_RETURN(c.head_dim, f.integer_or("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0));
  }
  EVT_RETURN_IF_ERROR(read_rope(f, source, c));
  EVT_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.boolean_or("tie_word_embeddings", false));
  c.qk_norm = c.architecture != Architecture::kLlama;
  if (c.architecture == Architecture::kQwen3Moe) EVT_RETURN_IF_ERROR(read_moe(f, c));
  EVT_RETURN_IF_ERROR(read_token_ids(f, c));
  // transformers 5.x renamed torch_dtype to dtype.
  EVT_ASSIGN_OR_RETURN(const std::string dtype, f.string_or("dtype", "bfloat16"));
  EVT_ASSIGN_OR_RETURN(c.torch_dtype, f.string_or("torch_dtype", dtype));
  EVT_RETURN_IF_ERROR(validate_config(c, source));
  return c;
}

Expected<ModelConfig> load_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json);
  if (!in) return error("{}: cannot open: {}", config_json.string(), std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), config_json.string());
}

namespace {

Status validate_moe(const ModelConfig& c, const std::string& source) {
  if (c.moe.has_value() != (c.architecture == Architecture::kQwen3Moe)) {
    return error("{}: {} {} expert settings", source, hf_architecture_name(c.architecture),
                 c.moe ? "has no" : "needs");
  }
  if (!c.moe) return Status();
  const MoeConfig& m = *c.moe;
  if (m.num_experts < 0) return error("{}: num_experts must not be negative, got {}", source, m.num_experts);
  // transformers computes (layer + 1) % decoder_sparse_step for every layer.
  if (m.decoder_sparse_step < 1) {
    return error("{}: decoder_sparse_step must be positive, got {}", source, m.decoder_sparse_step);
  }
  for (int64_t layer : m.mlp_only_layers) {
    if (layer < 0 || layer >= c.num_layers) {
      return error("{}: mlp_only_layers names layer {}, but the model has {} layers", source, layer, c.num_layers);
    }
  }
  if (m.num_experts == 0) return Status();
  if (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts) {
    return error("{}: num_experts_per_tok {} must be between 1 and num_experts {}", source, m.num_experts_per_tok,
                 m.num_experts);
  }
  if (m.moe_intermediate_size <= 0) {
    return error("{}: moe_intermediate_size must be positive, got {}", source, m.moe_intermediate_size);
  }
  return Status();
}

}  // namespace

Status validate_config(const ModelConfig& c, const std::string& source) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"hidden_size", c.hidden_size},        {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},   {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},          {"max_position_embeddings", c.max_position_embeddings},
  };
  for (const auto& [key, value] : sizes) {
    if (value <= 0) return error("{}: {} must be positive, got {}", source, key, value);
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return error("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source, c.num_heads,
                 c.num_kv_heads);
  }
  if (c.head_dim % 2 != 0) return error("{}: head_dim {} must be even (RoPE rotates pairs)", source, c.head_dim);
  if (!(c.rms_norm_eps > 0)) return error("{}: rms_norm_eps must be positive, got {}", source, c.rms_norm_eps);
  if (!(c.rope_theta > 0)) return error("{}: rope_theta must be positive, got {}", source, c.rope_theta);
  if (const auto& s = c.rope_scaling) {
    if (!(s->factor > 0) || !(s->low_freq_factor > 0) || s->original_max_position_embeddings <= 0) {
      return error("{}: llama3 rope scaling needs positive factor, low_freq_factor and "
                   "original_max_position_embeddings",
                   source);
    }
    if (!(s->high_freq_factor > s->low_freq_factor)) {
      return error("{}: llama3 rope scaling needs high_freq_factor ({}) > low_freq_factor ({})", source,
                   s->high_freq_factor, s->low_freq_factor);
    }
  }
  for (int64_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) return error("{}: eos_token_id {} is outside the vocabulary", source, id);
  }
  if (c.bos_token_id && (*c.bos_token_id < 0 || *c.bos_token_id >= c.vocab_size)) {
    return error("{}: bos_token_id {} is outside the vocabulary", source, *c.bos_token_id);
  }
  return validate_moe(c, source);
}

std::string to_hf_config_json(const ModelConfig& c) {
  json j;
  j["architectures"] = {std::string(hf_architecture_name(c.architecture))};
  j["model_type"] = std::string(architecture_name(c.architecture));
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  if (const auto& s = c.rope_scaling) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s->factor},
                         {"low_freq_factor", s->low_freq_factor},
                         {"high_freq_factor", s->high_freq_factor},
                         {"original_max_position_embeddings", s->original_max_position_embeddings}};
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = c.bos_token_id ? json(*c.bos_token_id) : json(nullptr);
  j["eos_token_id"] = c.eos_token_ids.empty()       ? json(nullptr)
                      : c.eos_token_ids.size() == 1 ? json(c.eos_token_ids[0])
                                                    : json(c.eos_token_ids);
  j["torch_dtype"] = c.torch_dtype;
  // What the architectures fix and transformers expects to find.
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  if (c.architecture == Architecture::kLlama) {
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  } else {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.num_layers;
  }
  if (const auto& m = c.moe) {
    // num_experts as the Hub's Qwen3-MoE files spell it; transformers 5.x reads it too.
    j["num_experts"] = m->num_experts;
    j["num_experts_per_tok"] = m->num_experts_per_tok;
    j["moe_intermediate_size"] = m->moe_intermediate_size;
    j["norm_topk_prob"] = m->norm_topk_prob;
    j["decoder_sparse_step"] = m->decoder_sparse_step;
    j["mlp_only_layers"] = m->mlp_only_layers;
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = 0.001;
  }
  return j.dump(2) + "\n";
}

}  // namespace evt::model
