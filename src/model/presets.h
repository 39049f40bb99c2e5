#pragma once
// The published Qwen3 (dense and MoE) and Llama 3.x model shapes, for random-weight models and
// benchmarks without downloading a checkpoint, and a tiny Qwen3-MoE for tests.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "util/status.h"

namespace evt::model {

// "qwen3-0.6b", ..., "qwen3-30b-a3b", "qwen3-moe-tiny", "llama-3.2-1b", "llama-3.1-8b".
std::vector<std::string> preset_names();

// A preset by its full name, or by the name without its family prefix ("0.6b", "30b-a3b",
// "3.1-8b"; architecture_family) where that is unambiguous or `arch` settles it. The error
// lists the presets.
Expected<ModelConfig> preset_config(std::string_view name, std::optional<Architecture> arch = std::nullopt);

}  // namespace evt::model
