// The fixture tests on the CPU backend: the executor with the naive references, and the
// generated megakernel on threads in each of its schedules.

#include "model/cpu_decoder.h"
#include "model/decode_fixture_test.h"
#include "model/make_model.h"
#include "model/test_files.h"

namespace evt::model::testing {

// The CPU backend has no wide passes: its steps run the same either way.
Expected<std::unique_ptr<Decoder>> make_test_decoder(std::shared_ptr<const LoadedModel> model, Exec exec,
                                                     bool /*wide_passes*/) {
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

// With 40 experts a layer, the static schedule's search for each down tile's expert
// (megakernel_codegen.cc, a range trigger over abutting ranges) takes several rounds, where the
// fixture's 8 experts take two. A tile it misplaced would be skipped or wait on another expert:
// the static megakernel must give the dynamic one's logits bit for bit (same bodies, sums in a
// fixed order), and dynamic scheduling finds a tile's expert by pushing ranges, not by searching.
TEST(MoeBackends, StaticScheduleFindsEveryDownTileAmongManyExperts) {
  ScratchDir dir;
  ModelConfig c = tiny_config(Architecture::kQwen3Moe);
  c.moe->num_experts = 40;
  c.moe->num_experts_per_tok = 4;
  c.moe->mlp_only_layers = {};
  c.head_dim = 64;  // a compiled decode graph's
  ASSERT_TRUE(write_random_model(c, dir.path(), {.seed = 5}).ok());
  auto model = load_model(dir.path());
  ASSERT_TRUE(model.ok()) << model.status().message();
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 42, 7}, {250, 3}, {99, 100, 101, 102, 103, 104}};
  std::vector<GenerateResult> runs;
  for (Exec exec : {Exec::kMegakernelDynamic, Exec::kMegakernel}) {
    auto decoder = make_test_decoder(*model, exec);
    ASSERT_TRUE(decoder.ok()) << decoder.status().message();
    auto r = generate(**decoder, prompts, {.max_tokens = 4, .logit_steps = 4});
    ASSERT_TRUE(r.ok()) << exec_name(exec) << ": " << r.status().message();
    runs.push_back(std::move(*r));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(runs[1].sequences[i].tokens, runs[0].sequences[i].tokens) << "prompt " << i;
    EXPECT_EQ(runs[1].sequences[i].logits, runs[0].sequences[i].logits) << "prompt " << i;
  }
}

}  // namespace
}  // namespace evt::model::testing
