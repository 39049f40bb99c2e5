#pragma once
// One request as the engine tracks it: its tokens (prompt, then what it generated), how many of
// them are in the KV cache, and the pages that hold them.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampling_params.h"

namespace evt::engine {

using RequestId = int64_t;

enum class FinishReason {
  kNone,    // still running
  kStop,    // an EOS or stop token (the last token sent)
  kLength,  // max_tokens or the context limit
  kAbort,   // abort() or engine shutdown
  kError,   // the step failed; TokenEvent::error says why
};
std::string_view finish_reason_name(FinishReason r);

// What a request's callback receives: one event per new token, and a last one with the finish
// reason (carrying the final token when the request ends by stop or length).
struct TokenEvent {
  RequestId request = -1;
  int32_t token = -1;  // -1: no token (abort, error)
  FinishReason finish = FinishReason::kNone;
  std::string error;   // with kError
  std::optional<TokenLogprobs> logprobs;  // with a token, when the request asked for logprobs
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct Sequence {
  RequestId id = -1;
  std::vector<int32_t> tokens;  // the prompt, then the generated tokens
  int64_t prompt_tokens = 0;
  int64_t computed = 0;         // leading tokens whose K/V are in the cache
  std::vector<int32_t> pages;   // its row of the block table
  SamplingParams params;
  uint64_t seed = 0;            // params.seed or one the engine drew
  std::map<int32_t, int32_t> output_counts;  // generated token -> occurrences (penalties)
  std::shared_ptr<const TokenCallback> callback;  // shared with events still to be delivered

  int64_t outputs() const { return static_cast<int64_t>(tokens.size()) - prompt_tokens; }
  // Tokens not yet in the cache: 1 for a decoding sequence, more while its prompt (or, after a
  // preemption, its prompt and outputs) is being prefilled.
  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed; }
};

}  // namespace evt::engine
