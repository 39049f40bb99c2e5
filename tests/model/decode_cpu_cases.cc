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
                                           Case{"llama-tiny", Exec::kKernels},
                                           Case{"qwen3-moe-tiny", Exec::kReference}),
                         case_name);

// A model with sparse MoE layers runs on the executor only (its MoE tile functions have no
// megakernel bodies yet), and the CUDA backend refuses it by name rather than loading it wrongly.
TEST(MoeBackends, MegakernelModesAndCudaRefuseMoe) {
  auto model = load_model(fixture_dir("qwen3-moe-tiny"));
  ASSERT_TRUE(model.ok()) << model.status().message();
  for (Exec exec : {Exec::kMegakernel, Exec::kMegakernelDynamic, Exec::kKernels}) {
    auto d = make_test_decoder(*model, exec);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().message(),
              fixture_dir("qwen3-moe-tiny").string() + ": the MoE blocks of Qwen3MoeForCausalLM run on the CPU "
              "executor only for now (--exec reference, not " + std::string(exec_name(exec)) +
              "): their tile functions have no megakernel bodies yet");
  }
  EXPECT_EQ(check_cuda_decodable((*model)->config, "models/moe").message(),
            "models/moe: Qwen3MoeForCausalLM (8 experts, top-2) is a mixture-of-experts model, which runs on the CPU "
            "backend only for now (--device cpu --exec reference): its MoE tile functions have no CUDA bodies yet");
  ModelConfig many = (*model)->config;
  many.moe->num_experts = 257;
  EXPECT_EQ(check_decodable(many).message(), "257 experts per layer: the MoE tile functions take at most 256");
  // Without sparse layers (no experts) a Qwen3-MoE config is a dense model, which the CUDA backend runs.
  ModelConfig dense = (*model)->config;
  dense.moe->num_experts = 0;
  EXPECT_TRUE(check_cuda_decodable(dense, "models/moe").ok());
}


}  // namespace
}  // namespace evt::model::testing
