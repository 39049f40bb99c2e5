// The fixture tests on the CUDA backend, in every exec mode it has.

#include "model/cuda_decoder.h"
#include "model/decode_fixture_test.h"

namespace evt::model::testing {

Expected<std::unique_ptr<Decoder>> make_test_decoder(std::shared_ptr<const LoadedModel> model, Exec exec) {
  CudaDecoderOptions o;
  o.exec = exec;
  o.kv = KvGeometry{16, 64};
  o.max_context = 256;
  return make_cuda_decoder(std::move(model), o);
}

namespace {

INSTANTIATE_TEST_SUITE_P(Cuda, FixtureDecode,
                         ::testing::ValuesIn(fixture_cases({Exec::kMegakernel, Exec::kMegakernelDynamic,
                                                            Exec::kMegakernelMixed, Exec::kKernels, Exec::kGraphs})),
                         case_name);

}  // namespace
}  // namespace evt::model::testing
