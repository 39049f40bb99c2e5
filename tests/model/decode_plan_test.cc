// What plan_step binds for a step: who finishes the QKV projection's heads and appends the step's
// keys and values to the cache (kernels/llm/decode_attention.h, qkv_finish.h), and how the LM
// head is tiled.

#include <gtest/gtest.h>

#include "kernels/llm/decode_config.h"
#include "model/decode_plan.h"
#include "model/presets.h"

namespace evt::model {
namespace {

namespace llm = kernels::llm;

// Sequence s's tokens sit at positions 40 + s % 8, 41 + s % 8, ... of its own eight pages.
StepBatch batch_of(const std::vector<int32_t>& token_seq, int64_t seqs) {
  StepBatch b;
  std::vector<int32_t> next(static_cast<size_t>(seqs));
  for (int64_t s = 0; s < seqs; ++s) next[static_cast<size_t>(s)] = static_cast<int32_t>(40 + s % 8);
  for (size_t t = 0; t < token_seq.size(); ++t) {
    b.ids.push_back(1);
    b.token_seq.push_back(token_seq[t]);
    b.positions.push_back(next[static_cast<size_t>(token_seq[t])]++);
  }
  for (int64_t s = 0; s < seqs; ++s) b.logit_rows.push_back(static_cast<int32_t>(s));
  b.pages_per_seq = 8;
  for (int32_t p = 0; p < seqs * 8; ++p) b.block_table.push_back(p);
  return b;
}

TEST(PlanStep, ADecodeStepLetsAttentionFinishItsHeadsAndAPrefillChunkBindsQkvFinishTiles) {
  auto c = preset_config("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const KvGeometry kv{16, 256};
  const Tiling tiling = default_tiling(*c, 3, 64, 132);
  struct Step {
    std::vector<int32_t> token_seq;
    int64_t seqs;
    bool decode;
  };
  for (const Step& s : std::vector<Step>{{{0}, 1, true},
                                         {{2, 0, 1}, 3, true},
                                         {{0, 0, 0}, 1, false},   // a prefill chunk
                                         {{1, 0, 1}, 2, false}}) {  // a decode beside a chunk
    auto plan = plan_step(*c, tiling, kv, batch_of(s.token_seq, s.seqs));
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    // 32 heads x 3 tokens over 132 workers: a (head, token) pair a tile.
    EXPECT_EQ(plan->dims.at("NQF"), s.decode ? 0 : 32 * 3) << s.token_seq.size() << " tokens";
    EXPECT_EQ(plan->cfg[llm::kCfgAttentionFinishes], s.decode ? 1 : 0) << s.token_seq.size() << " tokens";
    EXPECT_EQ(plan->cfg[llm::kCfgFinishPairs], 1) << s.token_seq.size() << " tokens";
  }
  // A chunk of 64 tokens: 32 heads x 64 tokens over 132 workers, 16 pairs a tile.
  auto plan = plan_step(*c, tiling, kv, batch_of(std::vector<int32_t>(64, 0), 1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->dims.at("NQF"), 128);
  EXPECT_EQ(plan->cfg[llm::kCfgFinishPairs], 16);
}

TEST(PlanStep, TheLmHeadIsOneTaskAWorkerInRoundsOfPanelsTheWarpsHold) {
  auto c = preset_config("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  // 151,936 rows are 9,496 groups, 72 a worker: 4 rounds of 18 groups (the warps hold 22).
  const Tiling tiling = default_tiling(*c, 1, 64, 132);
  EXPECT_EQ(tiling.rows_v, 18 * 16);
  EXPECT_EQ(tiling.lm_rounds, 4);
  auto plan = plan_step(*c, tiling, KvGeometry{16, 256}, batch_of({0}, 1));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->dims.at("NV"), 132);
  EXPECT_EQ(plan->cfg[llm::kCfgRowsV], 18 * 16);
  EXPECT_EQ(plan->cfg[llm::kCfgLmRounds], 4);
}

}  // namespace
}  // namespace evt::model
