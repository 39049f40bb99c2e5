#pragma once
// Writing a checkpoint with random weights and a model's real shapes, for tests and benchmarks
// of models we do not have weights for. transformers loads the result like any checkpoint.

#include <cstdint>
#include <filesystem>

#include "model/config.h"
#include "model/progress.h"
#include "util/status.h"

namespace evt::model {

struct MakeModelOptions {
  uint64_t seed = 0;
  // Hugging Face's default shard size; a tensor larger than this gets a shard of its own.
  uint64_t max_shard_bytes = 4ull << 30;
  ProgressFn progress;  // none: silent
};

struct MakeModelResult {
  uint64_t num_parameters = 0;
  uint64_t total_bytes = 0;
  int num_shards = 0;
};

// Writes config.json and bf16 safetensors into `dir`, which must be new or empty: matrices
// drawn from a bell-shaped distribution with standard deviation 0.02, norm weights 1.0, the
// same bits for the same seed whatever the sharding. Streams in chunks, so memory use does not
// grow with the model. config.json is written last, so a directory without one is incomplete.
Expected<MakeModelResult> write_random_model(const ModelConfig& config, const std::filesystem::path& dir,
                                             const MakeModelOptions& options);

}  // namespace evt::model
