#pragma once
// The synthetic decode steps the benchmarks and the tuner time.

#include <cstdint>
#include <random>

#include "model/config.h"
#include "model/decode_plan.h"

namespace evt::cli {

// B sequences of `ctx` cached positions each, one new token per sequence; pages laid out
// sequence after sequence (the cache needs batch * (ctx / page_size + 1) pages). The cache holds
// whatever an earlier step left, which costs the same.
model::StepBatch decode_batch(const model::ModelConfig& c, int64_t batch, int64_t ctx, int64_t page_size,
                              std::mt19937& rng);

}  // namespace evt::cli
