#pragma once
// Greedy generation over a Decoder: the prompts' prefill as one ragged step, then one decode
// step per new token for every sequence still running. Pages come from a KvPages pool the size
// of the decoder's cache and go back when a sequence ends.

#include <cstdint>
#include <vector>

#include "model/decoder.h"

namespace evt::model {

struct GenerateOptions {
  int64_t max_tokens = 16;   // new tokens per sequence
  int64_t logit_steps = 0;   // keep the logits of the first steps (for tests)
  bool stop_at_eos = false;  // end a sequence at one of the config's EOS ids
};

struct SequenceOutput {
  std::vector<int32_t> tokens;              // the new tokens
  std::vector<std::vector<float>> logits;   // per kept step, vocab-sized
};

struct GenerateResult {
  std::vector<SequenceOutput> sequences;  // in prompt order
  std::vector<double> step_ms;            // wall time of each step; step 0 is the prefill
};

Expected<GenerateResult> generate(Decoder& decoder, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateOptions& options);

}  // namespace evt::model
