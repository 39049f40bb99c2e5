#include "model/loaded_model.h"

#include "model/decode_plan.h"

namespace evt::model {

Expected<std::shared_ptr<const LoadedModel>> load_model(const std::filesystem::path& dir, const LoadOptions& options) {
  auto model = std::make_shared<LoadedModel>();
  model->dir = dir;
  EVT_ASSIGN_OR_RETURN(model->config, load_config(dir / "config.json"));
  if (Status s = check_decodable(model->config); !s.ok()) return error("{}: {}", (dir / "config.json").string(), s.message());
  EVT_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(dir));
  model->checkpoint = std::make_unique<Checkpoint>(std::move(checkpoint));
  EVT_ASSIGN_OR_RETURN(model->weights, load_weights(model->config, *model->checkpoint, options));
  return std::shared_ptr<const LoadedModel>(std::move(model));
}

}  // namespace evt::model
