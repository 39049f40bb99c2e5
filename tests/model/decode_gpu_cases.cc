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
                         ::testing::Values(Case{"qwen3-tiny", Exec::kMegakernel},
                                           Case{"qwen3-tiny", Exec::kMegakernelDynamic},
                                           Case{"qwen3-tiny", Exec::kKernels}, Case{"qwen3-tiny", Exec::kGraphs},
                                           Case{"llama-tiny", Exec::kMegakernel},
                                           Case{"llama-tiny", Exec::kMegakernelDynamic},
                                           Case{"llama-tiny", Exec::kKernels}, Case{"llama-tiny", Exec::kGraphs}),
                         case_name);

// Never loaded wrongly: the MoE fixture is refused before any weight reaches the GPU.
TEST(CudaMoe, RefusesAnMoeModelNamingIt) {
  auto model = load_model(fixture_dir("qwen3-moe-tiny"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto d = make_test_decoder(*model, Exec::kMegakernel);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.status().message().starts_with(fixture_dir("qwen3-moe-tiny").string() + ": Qwen3MoeForCausalLM"))
      << d.status().message();
  EXPECT_NE(d.status().message().find("runs on the CPU backend only for now"), std::string::npos);
}

}  // namespace
}  // namespace evt::model::testing
