// The fixture tests on the CPU backend: the executor with the naive references, and the
// generated megakernel on threads in each of its schedules.

#include "model/cpu_decoder.h"
#include "model/decode_fixture_test.h"

namespace evt::model::testing {

Expected<std::unique_ptr<Decoder>> make_test_decoder(std::shared_ptr<const LoadedModel> model, Exec exec) {
  CpuDecoderOptions o;
  o.exec = exec;
  o.workers = 3;
  o.kv = KvGeometry{16, 64};
  return make_cpu_decoder(std::move(model), o);
}

namespace {

INSTANTIATE_TEST_SUITE_P(Cpu, FixtureDecode,
                         ::testing::Values(Case{"qwen3-tiny", Exec::kReference}, Case{"qwen3-tiny", Exec::kMegakernel},
                                           Case{"qwen3-tiny", Exec::kMegakernelDynamic},
                                           Case{"qwen3-tiny", Exec::kKernels}, Case{"llama-tiny", Exec::kReference},
                                           Case{"llama-tiny", Exec::kMegakernel},
                                           Case{"llama-tiny", Exec::kMegakernelDynamic},
                                           Case{"llama-tiny", Exec::kKernels}),
                         case_name);


}  // namespace
}  // namespace evt::model::testing
