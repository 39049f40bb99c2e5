#pragma once
// A model directory loaded for inference: its config, the mapped checkpoint and the weights that
// point into it. The checkpoint is owned here because unconverted weights are views of it.

#include <filesystem>
#include <memory>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/weights.h"

namespace evt::model {

struct LoadedModel {
  std::filesystem::path dir;
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;
  ModelWeights weights;
};

// Reads DIR/config.json and the checkpoint beside it, and checks that the decode graph can run
// the model (decode_plan.h: check_decodable). Errors name the file or tensor at fault.
Expected<std::shared_ptr<const LoadedModel>> load_model(const std::filesystem::path& dir, const LoadOptions& options = {});

}  // namespace evt::model
