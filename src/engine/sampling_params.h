#pragma once
// What a request asks of sampling and of stopping, as an OpenAI-style server receives it. The
// sampling itself runs on the device, in the step graph's `sample` task
// (kernels/llm/sample.h); this file only checks the values and says what they mean.

#include <cstdint>
#include <optional>
#include <vector>

#include "util/status.h"

namespace evt::engine {

// The most alternatives a request may ask to see beside each token's logprob (OpenAI's limit for
// completions).
inline constexpr int32_t kMaxLogprobs = 5;

struct SamplingParams {
  float temperature = 0;          // 0: greedy
  int32_t top_k = 0;              // 0: off
  float top_p = 1;                // 1: off
  float min_p = 0;                // 0: off
  float presence_penalty = 0;     // subtracted once from each token already generated
  float frequency_penalty = 0;    // subtracted per occurrence in the generated tokens
  std::optional<uint64_t> seed;   // unset: the engine draws one; set: reproducible output
  int64_t max_tokens = 16;        // new tokens at most
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;        // keep going past the model's EOS ids (benchmarks)
  // Set: each token comes with its logprob and the logprobs of this many most likely tokens
  // (0..kMaxLogprobs), from the model's raw logits (before temperature and penalties).
  std::optional<int32_t> logprobs;
};

// Names the first value out of range, e.g. "top_p must be in (0, 1], got 1.5". Ranges follow
// OpenAI's API where it has one (penalties in [-2, 2]).
Status validate(const SamplingParams& p, int64_t vocab_size);

}  // namespace evt::engine
