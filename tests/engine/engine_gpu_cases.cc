// The engine tests (engine_test.cc) on the CUDA backend: the static megakernel.

#include "engine/engine_test.h"
#include "model/cuda_decoder.h"

namespace evt::engine::testing {

Expected<std::unique_ptr<model::Decoder>> make_engine_decoder(std::shared_ptr<const model::LoadedModel> model,
                                                              int64_t pages) {
  model::CudaDecoderOptions o;
  o.exec = model::Exec::kMegakernel;
  o.kv = {16, pages};
  return model::make_cuda_decoder(std::move(model), o);
}

}  // namespace evt::engine::testing
