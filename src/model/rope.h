#pragma once
// RoPE inverse frequencies, as transformers computes them for the config's rope type.

#include <vector>

#include "model/config.h"

namespace evt::model {

// head_dim / 2 values: inv_freq[i] = rope_theta^(-2i / head_dim), then, for a llama3
// rope_scaling, divided by `factor` at long wavelengths and blended smoothly in between
// (transformers' _compute_llama3_parameters). Computed in double and rounded once to float;
// transformers computes in float32, so values may differ from it in the last bit.
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace evt::model
