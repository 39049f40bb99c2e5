// The engine tests (engine_test.cc) on the CPU backend: the generated megakernel on 3 threads.

#include "engine/engine_test.h"
#include "model/cpu_decoder.h"

namespace evt::engine::testing {

std::vector<model::Exec> engine_test_execs() { return {model::Exec::kMegakernel}; }

Expected<std::unique_ptr<model::Decoder>> make_engine_decoder(std::shared_ptr<const model::LoadedModel> model,
                                                              model::Exec exec, int64_t pages) {
  return model::make_cpu_decoder(std::move(model), {.exec = exec, .workers = 3, .kv = {16, pages}});
}

}  // namespace evt::engine::testing
