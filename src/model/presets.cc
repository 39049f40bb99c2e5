#include "model/presets.h"

#include <fmt/ranges.h>

namespace evt::model {

namespace {

struct Preset {
  std::string name;
  ModelConfig config;
};

// Values from the models' config.json on the Hugging Face Hub (Qwen/Qwen3-*, meta-llama/*).
ModelConfig qwen3(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads, bool tied) {
  return {.architecture = Architecture::kQwen3,
          .hidden_size = hidden,
          .intermediate_size = intermediate,
          .num_layers = layers,
          .num_heads = heads,
          .num_kv_heads = 8,
          .head_dim = 128,
          .vocab_size = 151936,
          .max_position_embeddings = 40960,
          .rms_norm_eps = 1e-6,
          .rope_theta = 1e6,
          .tie_word_embeddings = tied,
          .qk_norm = true,
          .bos_token_id = 151643,
          .eos_token_ids = {151645}};
}

// Qwen3's attention with sparse MoE blocks; kv_heads differ from the dense Qwen3s' 8.
ModelConfig qwen3_moe(ModelConfig base, int64_t kv_heads, MoeConfig moe) {
  base.architecture = Architecture::kQwen3Moe;
  base.num_kv_heads = kv_heads;
  base.moe = std::move(moe);
  return base;
}

ModelConfig llama(int64_t hidden, int64_t intermediate, int64_t layers, int64_t head_dim, double rope_factor,
                  bool tied, std::vector<int64_t> eos) {
  return {.architecture = Architecture::kLlama,
          .hidden_size = hidden,
          .intermediate_size = intermediate,
          .num_layers = layers,
          .num_heads = 32,
          .num_kv_heads = 8,
          .head_dim = head_dim,
          .vocab_size = 128256,
          .max_position_embeddings = 131072,
          .rms_norm_eps = 1e-5,
          .rope_theta = 500000.0,
          .rope_scaling = Llama3RopeScaling{.factor = rope_factor},
          .tie_word_embeddings = tied,
          .qk_norm = false,
          .bos_token_id = 128000,
          .eos_token_ids = std::move(eos)};
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      {"qwen3-0.6b", qwen3(1024, 3072, 28, 16, true)},
      {"qwen3-1.7b", qwen3(2048, 6144, 28, 16, true)},
      {"qwen3-4b", qwen3(2560, 9728, 36, 32, true)},
      {"qwen3-8b", qwen3(4096, 12288, 36, 32, false)},
      {"qwen3-14b", qwen3(5120, 17408, 40, 40, false)},
      {"qwen3-32b", qwen3(5120, 25600, 64, 64, false)},
      {"qwen3-30b-a3b", qwen3_moe(qwen3(2048, 6144, 48, 32, false), 4,
                                  {.num_experts = 128, .num_experts_per_tok = 8, .moe_intermediate_size = 768,
                                   .norm_topk_prob = true})},
      // Not a published model: Qwen3-MoE at a size the CPU backend runs in tests, with a dense
      // layer (mlp_only_layers) among the sparse ones as some MoE models have.
      {"qwen3-moe-tiny", qwen3_moe(qwen3(256, 512, 4, 4, true), 2,
                                   {.num_experts = 8, .num_experts_per_tok = 2, .moe_intermediate_size = 64,
                                    .norm_topk_prob = true, .mlp_only_layers = {0}})},
      // The Instruct models' eos lists (end_of_text, eom, eot); the base models name 128001 only.
      {"llama-3.2-1b", llama(2048, 8192, 16, 64, 32.0, true, {128001, 128008, 128009})},
      {"llama-3.1-8b", llama(4096, 14336, 32, 128, 8.0, false, {128001, 128008, 128009})},
  };
  return kPresets;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets()) names.push_back(p.name);
  return names;
}

Expected<ModelConfig> preset_config(std::string_view name, std::optional<Architecture> arch) {
  std::vector<const Preset*> matches;
  for (const Preset& p : presets()) {
    if (arch && p.config.architecture != *arch) continue;
    const std::string prefix = std::string(architecture_family(p.config.architecture)) + "-";
    if (p.name == name || p.name == prefix + std::string(name)) matches.push_back(&p);
  }
  if (matches.size() == 1) return matches[0]->config;
  if (matches.empty()) {
    const std::string for_arch = arch ? fmt::format(" for {}", architecture_name(*arch)) : "";
    return error("no preset '{}'{} (presets: {})", name, for_arch, fmt::join(preset_names(), ", "));
  }
  std::vector<std::string_view> names;
  for (const Preset* p : matches) names.push_back(p->name);
  return error("preset '{}' is ambiguous ({}); pass --arch", name, fmt::join(names, ", "));
}

}  // namespace evt::model
