// The engine tests (engine_test.cc) on the CUDA backend: the static megakernel, and the graphs
// baseline, whose steps alternate between replayed decode graphs and plain launches; the MoE
// fixture also with its expert tiles from the ready queue (megakernel-mixed).

#include "engine/engine_test.h"
#include "model/cuda_decoder.h"

#include <vector>

namespace evt::engine::testing {

std::vector<EngineCase> engine_test_cases() {
  std::vector<EngineCase> cases;
  for (const char* fixture : {"qwen3-tiny", "llama-tiny", "qwen3-moe-tiny"}) {
    for (model::Exec exec : {model::Exec::kMegakernel, model::Exec::kGraphs}) cases.emplace_back(fixture, exec);
  }
  cases.emplace_back("qwen3-moe-tiny", model::Exec::kMegakernelMixed);
  return cases;
}

Expected<std::unique_ptr<model::Decoder>> make_engine_decoder(std::shared_ptr<const model::LoadedModel> model,
                                                              model::Exec exec, int64_t pages) {
  model::CudaDecoderOptions o;
  o.exec = exec;
  o.kv = {16, pages};
  return model::make_cuda_decoder(std::move(model), o);
}

}  // namespace evt::engine::testing
