// The fixture tests on the CUDA backend, in every exec mode it has.

#include "model/cuda_decoder.h"
#include "model/decode_fixture_test.h"

namespace evt::model::testing {

Expected<std::unique_ptr<Decoder>> make_test_decoder(std::shared_ptr<const LoadedModel> model, Exec exec,
                                                     bool wide_passes) {
  CudaDecoderOptions o;
  o.exec = exec;
  o.wide_passes = wide_passes ? 1 : -1;
  o.kv = KvGeometry{16, 64};
  o.max_context = 256;
  return make_cuda_decoder(std::move(model), o);
}

namespace {

INSTANTIATE_TEST_SUITE_P(Cuda, FixtureDecode,
                         ::testing::ValuesIn(fixture_cases({Exec::kMegakernel, Exec::kMegakernelDynamic,
                                                            Exec::kMegakernelMixed, Exec::kKernels, Exec::kGraphs})),
                         case_name);

// The megakernel's entry of wide passes, which no fixture's rule picks (their hidden sizes are
// small): the prompts of 17 and 40 tokens, and the batch of every prompt, prefill in its steps.
std::vector<Case> wide_pass_cases() {
  std::vector<Case> cases = fixture_cases({Exec::kMegakernel});
  for (Case& c : cases) c.wide_passes = true;
  return cases;
}
INSTANTIATE_TEST_SUITE_P(CudaWidePasses, FixtureDecode, ::testing::ValuesIn(wide_pass_cases()), case_name);

}  // namespace
}  // namespace evt::model::testing
