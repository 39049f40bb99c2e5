#pragma once
// The weights of a Qwen3 (dense or MoE) or Llama model as host bf16 tensors, checked against the
// config.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/progress.h"
#include "util/status.h"

namespace evt::model {

// bf16 bits, row-major; projections are [out_features, in_features] as Hugging Face stores them.
struct Bf16Tensor {
  std::string name;  // the checkpoint's name for it
  std::string file;  // the .safetensors it came from
  std::vector<int64_t> shape;
  std::span<const uint16_t> values;
  // Owns `values` when they were converted from fp16/fp32 (or realigned); null when they point
  // into the checkpoint's mapping.
  std::shared_ptr<const std::vector<uint16_t>> converted;

  int64_t numel() const { return num_elements(shape); }
};

// One expert of a sparse MoE block: a SwiGLU MLP of moe_intermediate_size.
struct ExpertWeights {
  Bf16Tensor gate_proj, up_proj, down_proj;
};

struct LayerWeights {
  Bf16Tensor input_layernorm;
  Bf16Tensor q_proj, k_proj, v_proj, o_proj;
  std::optional<Bf16Tensor> q_norm, k_norm;  // Qwen3s only: RMSNorm over each head's head_dim
  Bf16Tensor post_attention_layernorm;
  // A dense layer's MLP; empty in a sparse MoE layer (ModelConfig::is_moe_layer), which has the
  // router (mlp.gate, num_experts x hidden) and its experts instead.
  Bf16Tensor gate_proj, up_proj, down_proj;
  std::optional<Bf16Tensor> router;
  std::vector<ExpertWeights> experts;
};

// Tensors that were not converted point into the Checkpoint, which must outlive them.
struct ModelWeights {
  Bf16Tensor embed_tokens;
  std::vector<LayerWeights> layers;
  Bf16Tensor norm;
  Bf16Tensor lm_head;  // the same values as embed_tokens when tie_word_embeddings
};

struct LoadOptions {
  ProgressFn progress;  // none: silent
};

// Finds every tensor the config calls for, checks its shape, and converts fp16/fp32 to bf16
// (round to nearest even); bf16 tensors are used in place. Tensors the model does not use are
// ignored, as transformers does.
Expected<ModelWeights> load_weights(const ModelConfig& config, const Checkpoint& checkpoint,
                                    const LoadOptions& options = {});

// One checkpoint tensor as bf16: in place when it is bf16 already, converted otherwise.
Bf16Tensor to_bf16(const TensorRef& tensor);

// The tensors a checkpoint of this config holds (lm_head only when untied), as bf16, in
// Hugging Face's order: embeddings, layer by layer, final norm, lm_head.
std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config);

}  // namespace evt::model
