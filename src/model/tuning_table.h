#pragma once
// Step tilings measured offline (`eventide tune`): for one model's shapes on one kind of GPU, the
// K splits of the QKV projection and the KV splits of attention that gave the fastest step at
// each measured (batch, context). A decoder given a table (Decoder::set_tuning, --tuning FILE)
// uses its nearest entry instead of default_tiling()'s rules; the weight layout's row tiles
// (weight_tiling) are fixed at load time and are not in the table.

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/decode_plan.h"
#include "util/status.h"

namespace evt::model {

struct TunedTiling {
  int64_t tokens = 1;      // the step's tokens when measured (B)
  int64_t context = 1;     // its longest context
  int64_t qkv_splits = 1;  // K splits of the QKV projection
  int64_t kv_splits = 1;   // KV splits of attention
  double ms = 0;           // the measured step with these splits
  double default_ms = 0;   // and with default_tiling()'s
};

struct TuningTable {
  std::string shapes;  // model_shapes() of the model it was measured for
  std::string device;  // the GPU's name, for the reader
  std::string exec;    // the exec mode it was measured in
  std::vector<TunedTiling> entries;

  // The entry for a step of `tokens` tokens whose longest context is `context`: the fewest tokens
  // at or above the step's (else the most), then the shortest context at or above it (else the
  // longest). Null for an empty table.
  const TunedTiling* find(int64_t tokens, int64_t context) const;
};

// What a table must match: the sizes that decide the step's tiles and their costs.
std::string model_shapes(const ModelConfig& config);

// `base` (default_tiling's for the step) with the splits of the table's entry for the step, if any.
Tiling tuned_tiling(const Tiling& base, const TuningTable* table, int64_t tokens, int64_t longest_context);

// JSON. Loading checks every field and names the file and the entry at fault.
Expected<TuningTable> load_tuning_table(const std::string& path);
Status save_tuning_table(const std::string& path, const TuningTable& table);

}  // namespace evt::model
