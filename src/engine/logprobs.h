#pragma once
// Logprobs of a sampled token, computed on the host from its row of the step's logits: the
// log-softmax of the model's raw logits (before temperature and penalties, as vLLM reports them
// by default) at the chosen token, and the most likely tokens with theirs.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace evt::engine {

struct TokenLogprobs {
  float logprob = 0;                             // of the chosen token
  std::vector<std::pair<int32_t, float>> top;    // (id, logprob), most likely first
};

// `logits` is one row of V floats; `top_n` alternatives are listed (ties: the lower id first).
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n);

}  // namespace evt::engine
