#include "engine/sampling_params.h"

#include <cmath>

namespace evt::engine {

Status validate(const SamplingParams& p, int64_t vocab_size) {
  if (!std::isfinite(p.temperature) || p.temperature < 0 || p.temperature > 100) {
    return error("temperature must be in [0, 100], got {}", p.temperature);
  }
  if (p.top_k < 0) return error("top_k must be 0 (off) or positive, got {}", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return error("top_p must be in (0, 1], got {}", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return error("min_p must be in [0, 1], got {}", p.min_p);
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    return error("presence_penalty must be in [-2, 2], got {}", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    return error("frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);
  }
  if (p.logprobs && (*p.logprobs < 0 || *p.logprobs > kMaxLogprobs)) {
    return error("logprobs must be in [0, {}], got {}", kMaxLogprobs, *p.logprobs);
  }
  if (p.max_tokens < 1) return error("max_tokens must be at least 1, got {}", p.max_tokens);
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_size) return error("stop token id {} is outside the vocab of {}", id, vocab_size);
  }
  return Status();
}

}  // namespace evt::engine
