// The dense decode graph on the CPU backend against the Hugging Face fixtures
// (tests/fixtures/README.md): exact greedy tokens and logits within the fixture's tolerance, for
// every exec mode the CPU has, each prompt alone and all prompts in one ragged batch.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/cpu_decoder.h"
#include "model/fixture_reference.h"
#include "model/generate.h"

namespace evt::model {
namespace {

using testing::FixtureReference;
using testing::load_fixture_reference;

struct Case {
  std::string fixture;
  Exec exec;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.fixture + "_" + std::string(exec_name(info.param.exec));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class FixtureDecode : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ref_ = load_fixture_reference(GetParam().fixture);
    auto model = load_model(ref_.dir);
    ASSERT_TRUE(model.ok()) << model.status().message();
    CpuDecoderOptions o;
    o.exec = GetParam().exec;
    o.workers = 3;
    o.kv = KvGeometry{16, 64};
    auto decoder = make_cpu_decoder(*model, o);
    ASSERT_TRUE(decoder.ok()) << decoder.status().message();
    decoder_ = std::move(*decoder);
  }

  // The largest |ours - HF| over the kept logit rows of one prompt.
  static double max_logit_diff(const SequenceOutput& ours, const testing::FixturePrompt& hf) {
    double diff = 0;
    for (size_t s = 0; s < ours.logits.size() && s < hf.logits.size(); ++s) {
      for (size_t v = 0; v < hf.logits[s].size(); ++v) diff = std::max(diff, std::fabs(double(ours.logits[s][v]) - hf.logits[s][v]));
    }
    return diff;
  }

  void expect_matches(const GenerateResult& r, const std::vector<size_t>& prompts) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      const testing::FixturePrompt& hf = ref_.prompts[prompts[i]];
      const SequenceOutput& ours = r.sequences[i];
      EXPECT_EQ(ours.tokens, hf.greedy) << "prompt " << prompts[i];
      ASSERT_EQ(ours.logits.size(), hf.logits.size());
      const double diff = max_logit_diff(ours, hf);
      std::printf("  prompt %zu (%zu tokens): max |logit diff| %.4f (tolerance %.2f, min margin %.2f)\n", prompts[i],
                  hf.tokens.size(), diff, ref_.logits_tolerance, ref_.min_margin);
      EXPECT_LE(diff, ref_.logits_tolerance) << "prompt " << prompts[i];
    }
  }

  GenerateOptions options() const {
    GenerateOptions o;
    o.max_tokens = static_cast<int64_t>(ref_.prompts[0].greedy.size());
    o.logit_steps = static_cast<int64_t>(ref_.prompts[0].logits.size());
    return o;
  }

  FixtureReference ref_;
  std::unique_ptr<Decoder> decoder_;
};

TEST_P(FixtureDecode, EachPromptAloneMatchesHuggingFace) {
  for (size_t i = 0; i < ref_.prompts.size(); ++i) {
    auto r = generate(*decoder_, {ref_.prompts[i].tokens}, options());
    ASSERT_TRUE(r.ok()) << r.status().message();
    expect_matches(*r, {i});
  }
}

TEST_P(FixtureDecode, MixedLengthBatchMatchesHuggingFace) {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<size_t> order;
  // Longest first, so the batch's rows do not follow the prompts' order.
  for (size_t i = ref_.prompts.size(); i-- > 0;) {
    prompts.push_back(ref_.prompts[i].tokens);
    order.push_back(i);
  }
  auto r = generate(*decoder_, prompts, options());
  ASSERT_TRUE(r.ok()) << r.status().message();
  expect_matches(*r, order);
}

INSTANTIATE_TEST_SUITE_P(Cpu, FixtureDecode,
                         ::testing::Values(Case{"qwen3-tiny", Exec::kReference}, Case{"qwen3-tiny", Exec::kMegakernel},
                                           Case{"qwen3-tiny", Exec::kMegakernelDynamic},
                                           Case{"qwen3-tiny", Exec::kKernels}, Case{"llama-tiny", Exec::kReference},
                                           Case{"llama-tiny", Exec::kMegakernel},
                                           Case{"llama-tiny", Exec::kMegakernelDynamic},
                                           Case{"llama-tiny", Exec::kKernels}),
                         case_name);

}  // namespace
}  // namespace evt::model
