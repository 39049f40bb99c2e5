// The fixture tests of every backend (decode_fixture_test.h).

#include <map>
#include <string>

#include "model/decode_fixture_test.h"
#include "model/moe_graph.h"
#include "util/int_math.h"

namespace evt::model::testing {
namespace {

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

// A traced step, as `eventide bench moe` reads it: each layered group once per layer, and on the
// MoE fixture each layer's block timed with only its routed experts' gate/up tiles run.
TEST_P(FixtureDecode, TracedStepTimesItsStagesByLayer) {
  const Exec exec = GetParam().exec;
  if (exec == Exec::kReference || exec == Exec::kGraphs) {
    EXPECT_FALSE(decoder_->trace_next_step("").ok()) << "--exec " << exec_name(exec) << " runs no traced launches";
    return;
  }
  // The first prompt's prefill: one sequence, positions 0..n-1.
  const std::vector<int32_t>& tokens = ref_.prompts[0].tokens;
  const auto n = static_cast<int64_t>(tokens.size());
  StepBatch batch;
  batch.ids = tokens;
  for (int64_t t = 0; t < n; ++t) {
    batch.positions.push_back(static_cast<int32_t>(t));
    batch.token_seq.push_back(0);
  }
  batch.logit_rows = {static_cast<int32_t>(n - 1)};
  batch.pages_per_seq = (n + 15) / 16;
  for (int32_t p = 0; p < batch.pages_per_seq; ++p) batch.block_table.push_back(p);

  ASSERT_TRUE(decoder_->trace_next_step("").ok());
  auto traced = decoder_->step(batch, false);
  ASSERT_TRUE(traced.ok()) << traced.status().message();
  const ModelConfig& c = decoder_->config();
  std::map<std::string, int64_t> layers;  // per group
  for (const StageTime& s : traced->stages) {
    EXPECT_LE(s.start_us, s.end_us) << s.group;
    EXPECT_GT(s.tasks, 0) << s.group;
    if (s.layer >= 0) ++layers[s.group];
  }
  EXPECT_EQ(layers["o_proj"], c.num_layers);
  EXPECT_EQ(layers["qkv"], c.num_layers);
  auto untraced = decoder_->step(batch, false);
  ASSERT_TRUE(untraced.ok()) << untraced.status().message();
  EXPECT_TRUE(untraced->stages.empty()) << "only the step after trace_next_step is traced";

  auto blocks = moe_block_times(traced->stages);
  if (!c.has_moe_layers()) {
    EXPECT_FALSE(blocks.ok());
    return;
  }
  ASSERT_TRUE(blocks.ok()) << blocks.status().message();
  ASSERT_EQ(static_cast<int64_t>(blocks->size()), c.num_layers);
  const Tiling tiling = decoder_->step_tiling(batch.tokens(), batch.longest_context());
  for (const MoeBlockTime& b : *blocks) {
    EXPECT_GT(b.us, 0) << "layer " << b.layer;
    if (!c.is_moe_layer(b.layer)) {
      EXPECT_EQ(b.gate_up_tiles, ceil_div(c.intermediate_size, tiling.rows_i)) << "layer " << b.layer;
      continue;
    }
    const int64_t per_expert = ceil_div(c.moe->moe_intermediate_size, tiling.rows_xi);
    EXPECT_EQ(b.gate_up_tiles % per_expert, 0) << "layer " << b.layer;
    const int64_t experts = b.gate_up_tiles / per_expert;
    EXPECT_GE(experts, c.moe->num_experts_per_tok) << "layer " << b.layer;
    EXPECT_LE(experts, std::min(c.moe->num_experts, n * c.moe->num_experts_per_tok)) << "layer " << b.layer;
  }
}

}  // namespace
}  // namespace evt::model::testing
