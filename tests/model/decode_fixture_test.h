#pragma once
// The decode graphs against the Hugging Face fixtures (tests/fixtures/README.md): exact
// greedy tokens and logits within the fixture's tolerance, each prompt alone and all prompts in
// one ragged batch. The tests (decode_test.cc) are the same for every backend; each test binary
// instantiates them for its backend's exec modes and says how to make its decoder.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/fixture_reference.h"
#include "model/generate.h"
#include "model/loaded_model.h"

namespace evt::model::testing {

// Defined once per test binary: the decoder of its backend; with wide_passes, one whose steps of
// more than 16 tokens take wide passes (kernels/llm/gemv.h) whatever the model.
Expected<std::unique_ptr<Decoder>> make_test_decoder(std::shared_ptr<const LoadedModel> model, Exec exec,
                                                     bool wide_passes = false);

struct Case {
  std::string fixture;
  Exec exec;
  bool wide_passes = false;
};

// Every fixture (dense Qwen3, Llama-3, Qwen3-MoE) in each of `execs`.
inline std::vector<Case> fixture_cases(std::initializer_list<Exec> execs) {
  std::vector<Case> cases;
  for (const char* fixture : {"qwen3-tiny", "llama-tiny", "qwen3-moe-tiny"}) {
    for (Exec exec : execs) cases.push_back({fixture, exec});
  }
  return cases;
}

inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.fixture + "_" + std::string(exec_name(info.param.exec)) +
                     (info.param.wide_passes ? "_wide_passes" : "");
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class FixtureDecode : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    ref_ = load_fixture_reference(GetParam().fixture);
    auto model = load_model(ref_.dir);
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto decoder = make_test_decoder(*model, GetParam().exec, GetParam().wide_passes);
    ASSERT_TRUE(decoder.ok()) << decoder.status().message();
    decoder_ = std::move(*decoder);
  }

  // The largest |ours - HF| over the kept logit rows of one prompt.
  static double max_logit_diff(const SequenceOutput& ours, const FixturePrompt& hf) {
    double diff = 0;
    for (size_t s = 0; s < ours.logits.size() && s < hf.logits.size(); ++s) {
      for (size_t v = 0; v < hf.logits[s].size(); ++v) diff = std::max(diff, std::fabs(double(ours.logits[s][v]) - hf.logits[s][v]));
    }
    return diff;
  }

  void expect_matches(const GenerateResult& r, const std::vector<size_t>& prompts) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      const FixturePrompt& hf = ref_.prompts[prompts[i]];
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

}  // namespace evt::model::testing
