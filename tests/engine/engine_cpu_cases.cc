// The engine tests (engine_test.cc) on the CPU backend: the generated megakernels on 3 threads
// (the MoE fixture's with its expert tiles from the ready queue).

#include "engine/engine_test.h"
#include "model/cpu_decoder.h"

namespace evt::engine::testing {

std::vector<EngineCase> engine_test_cases() {
  return {{"qwen3-tiny", model::Exec::kMegakernel},
          {"llama-tiny", model::Exec::kMegakernel},
          {"qwen3-moe-tiny", model::Exec::kMegakernelMixed}};
}

Expected<std::unique_ptr<model::Decoder>> make_engine_decoder(std::shared_ptr<const model::LoadedModel> model,
                                                              model::Exec exec, int64_t pages) {
  return model::make_cpu_decoder(std::move(model), {.exec = exec, .workers = 3, .kv = {16, pages}});
}

}  // namespace evt::engine::testing
