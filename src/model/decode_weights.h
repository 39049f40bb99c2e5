#pragma once
// The weights the dense decode graph reads, one list for every backend: each per-layer weight
// with its `wtab` cell (kernels/llm/decode_config.h), and the global ones. The CPU backend points
// the cells at the loaded tensors; the CUDA backend places each tensor in a device arena (copied
// or random) and points the cells there.

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "model/config.h"
#include "model/weights.h"

namespace evt::model {

enum class GlobalWeight { kNone, kEmbed, kFinalNorm, kLmHead };

struct DecodeWeight {
  std::string what;          // "layer 3 q_proj", for messages
  int64_t layer = -1;        // >= 0: wtab row of a per-layer weight
  kernels::llm::WeightColumn column = kernels::llm::kWq;  // its wtab column
  GlobalWeight global = GlobalWeight::kNone;              // or which global weight it is
  int64_t numel = 0;
  int64_t fan_in = 0;        // input features of a projection; 0 for a norm; -1 for the embedding
  const Bf16Tensor* host = nullptr;  // the loaded tensor; null without host weights

  int64_t wtab_index() const { return layer * kernels::llm::kWeightColumns + column; }
};

// Every weight of `config` in checkpoint order: embedding, layer by layer, final norm, and
// lm_head only when untied. `host` may be null (random weights).
std::vector<DecodeWeight> decode_weights(const ModelConfig& config, const ModelWeights* host);

}  // namespace evt::model
