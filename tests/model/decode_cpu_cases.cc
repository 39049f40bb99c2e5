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
                         ::testing::ValuesIn(fixture_cases({Exec::kReference, Exec::kMegakernel,
                                                            Exec::kMegakernelDynamic, Exec::kMegakernelMixed,
                                                            Exec::kKernels})),
                         case_name);

TEST(MoeBackends, RefusesMoreExpertsThanTheTileFunctionsTake) {
  auto model = load_model(fixture_dir("qwen3-moe-tiny"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  ModelConfig many = (*model)->config;
  many.moe->num_experts = 257;
  EXPECT_EQ(check_decodable(many).message(), "257 experts per layer: the MoE tile functions take at most 256");
  ModelConfig wide = (*model)->config;
  wide.moe->num_experts_per_tok = 17;
  EXPECT_EQ(check_decodable(wide).message(), "17 experts per token: the MoE tile functions take at most 16");
}

}  // namespace
}  // namespace evt::model::testing
