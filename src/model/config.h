#pragma once
// The model hyperparameters the engine needs, read from a Hugging Face config.json. Only the
// Qwen3 (dense and MoE) and Llama (3.x) architectures are accepted; anything else is refused by
// name rather than loaded wrongly.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace evt::model {

enum class Architecture {
  kQwen3,     // Qwen3ForCausalLM: RMSNorm on q and k per head
  kLlama,     // LlamaForCausalLM
  kQwen3Moe,  // Qwen3MoeForCausalLM: Qwen3's attention, sparse MoE blocks in place of MLPs
};

// "qwen3", "llama" or "qwen3_moe": the names --arch takes, and config.json's model_type.
std::string_view architecture_name(Architecture arch);
// "Qwen3ForCausalLM", "LlamaForCausalLM" or "Qwen3MoeForCausalLM": the names config.json uses.
std::string_view hf_architecture_name(Architecture arch);
std::optional<Architecture> parse_architecture_name(std::string_view name);
// "qwen3" (both Qwen3s) or "llama": the prefix of the architecture's preset names.
std::string_view architecture_family(Architecture arch);

// Llama 3.1's frequency-dependent RoPE scaling (rope_type "llama3").
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;

  bool operator==(const Llama3RopeScaling&) const = default;
};

// Qwen3-MoE's sparse blocks (transformers' Qwen3MoeSparseMoeBlock): a router picks
// num_experts_per_tok of num_experts SwiGLU experts per token.
struct MoeConfig {
  int64_t num_experts = 0;  // 0: every layer is dense
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;      // renormalize the top-k probabilities to sum to 1
  int64_t decoder_sparse_step = 1;  // every step-th layer is sparse ...
  std::vector<int64_t> mlp_only_layers;  // ... except these, which keep a dense MLP

  bool operator==(const MoeConfig&) const = default;
};

struct ModelConfig {
  Architecture architecture = Architecture::kQwen3;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_scaling;  // none: plain RoPE
  bool tie_word_embeddings = false;
  bool qk_norm = false;  // true exactly for the Qwen3s
  std::optional<MoeConfig> moe;  // exactly for Qwen3-MoE
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json may hold one id or a list
  std::string torch_dtype = "bfloat16";

  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  // Whether layer `layer` has a sparse MoE block, by transformers' rule (Qwen3MoeDecoderLayer):
  // experts exist, the layer is not in mlp_only_layers, and (layer + 1) % decoder_sparse_step == 0.
  // The other layers have a dense MLP of intermediate_size.
  bool is_moe_layer(int64_t layer) const;
  bool has_moe_layers() const;
  bool has_dense_layers() const;  // a layer with a dense MLP (every layer of a model without experts)

  bool operator==(const ModelConfig&) const = default;
};

// Parses config.json text; `source` names the file in error messages.
Expected<ModelConfig> parse_config(std::string_view json_text, const std::string& source);
Expected<ModelConfig> load_config(const std::filesystem::path& config_json);

// The sanity checks parse_config applies, for configs built in code (presets, tests).
Status validate_config(const ModelConfig& config, const std::string& source);

// config.json text that transformers' AutoConfig loads back into the same model.
std::string to_hf_config_json(const ModelConfig& config);

}  // namespace evt::model
