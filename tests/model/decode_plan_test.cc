// What plan_step binds for a step: who finishes the QKV projection's heads and appends the step's
// keys and values to the cache (kernels/llm/decode_attention.h, qkv_finish.h), how attention's
// tokens make runs, and how the LM head is tiled.

#include <gtest/gtest.h>

#include <numeric>
#include <utility>
#include <vector>

#include "kernels/llm/decode_attention.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "model/decode_plan.h"
#include "model/presets.h"
#include "runtime/megakernel/shared_memory.h"
#include "util/int_math.h"

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

TEST(PlanStep, WithOneKvSplitAttentionTakesRunsOfTokensAboutOneTaskAWorker) {
  auto c = preset_config("qwen3-0.6b");  // 8 KV heads
  ASSERT_TRUE(c.ok()) << c.status().message();
  const KvGeometry kv{16, 64 * 8};  // batch_of's eight pages a sequence
  Tiling tiling = default_tiling(*c, 3, 64, 132);
  std::vector<int32_t> seqs(64);
  std::iota(seqs.begin(), seqs.end(), 0);
  const StepBatch b = batch_of(seqs, 64);  // 64 decode tokens, the longest context 48 positions
  struct Case {
    int64_t split_len, splits, runs;
  };
  // One split: 512 (token, KV head) pairs over 132 workers, 4 tokens a run. Several: a token a run.
  for (const Case& k : std::vector<Case>{{64, 1, 16}, {16, 3, 64}}) {
    tiling.kv_split_len = k.split_len;
    auto plan = plan_step(*c, tiling, kv, b);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    EXPECT_EQ(plan->dims.at("KVS"), k.splits) << k.split_len;
    EXPECT_EQ(plan->dims.at("TA"), k.runs) << k.split_len;
    EXPECT_EQ(plan->cfg[llm::kCfgAttentionRuns], k.runs) << k.split_len;
  }
  // 16 tokens are 128 pairs: a token a run. A graph replay's splits rebind the runs.
  seqs.resize(16);
  auto plan = plan_step(*c, tiling, kv, batch_of(seqs, 16));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  plan->set_kv_splits(1, 132);
  EXPECT_EQ(plan->dims.at("TA"), 16);
  plan->set_kv_splits(1, 64);
  EXPECT_EQ(plan->dims.at("TA"), 8);
  plan->set_kv_splits(2, 64);
  EXPECT_EQ(plan->dims.at("TA"), 16);
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

// The plan of a step of `seqs` decoding sequences (one token each) on 132 workers, with the
// tiling's pass sets at `pass_sets`; and the scratch it asks for.
Expected<StepPlan> step_plan_of(const ModelConfig& c, int64_t seqs, int pass_sets = 1) {
  const KvGeometry kv{16, 1024};  // 64 sequences of eight pages
  std::vector<int32_t> token_seq;
  for (int32_t s = 0; s < seqs; ++s) token_seq.push_back(s);
  Tiling tiling = default_tiling(c, seqs, 512, 132);
  tiling.pass_sets = pass_sets;
  return plan_step(c, tiling, kv, batch_of(token_seq, seqs));
}

int64_t step_scratch_of(const ModelConfig& c, int64_t seqs, int pass_sets = 1) {
  auto plan = step_plan_of(c, seqs, pass_sets);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? plan->scratch_bytes : int64_t{-1};
}

TEST(PlanStep, TheScratchIsTheLeastInWhichTheInputsTakeAsFewSegmentsAsInThreeRingStagesScratchOrAllOfIt) {
  const int warps = llm::kDecodeThreads / 32;
  const int64_t three = mk::scratch_leaving_stages(3);
  const auto scratch = [](const ModelConfig& c, int64_t seqs) { return step_scratch_of(c, seqs); };
  // A dense model's down projection: intermediate_size columns, rows_h rows a tile.
  const auto down_segments = [&](const ModelConfig& c, int64_t tokens, int64_t bytes) {
    const int64_t groups = weight_tiling(c, 132).rows_h / llm::kTileRows;
    return llm::gemv_segments(c.intermediate_size, groups, tokens, warps, bytes);
  };
  for (const char* preset : {"qwen3-0.6b", "qwen3-8b", "qwen3-30b-a3b"}) {
    auto c = preset_config(preset);
    ASSERT_TRUE(c.ok()) << c.status().message();
    // Attention's scratch is the least any step asks for: B = 1 stages every input whole in it.
    const int64_t attention = llm::attention_scratch_bytes(c->head_dim, warps);
    EXPECT_EQ(scratch(*c, 1), round_up(attention, 1024)) << preset;
    for (int64_t b : {16, 64}) EXPECT_LE(scratch(*c, b), three) << preset << " B = " << b;
  }
  // 1.7B at B = 16: its down input (6,144 columns) takes two segments in three stages' scratch,
  // and in the step's, but three in 1 KiB less.
  auto c = preset_config("qwen3-1.7b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const int64_t wide = scratch(*c, 16);
  EXPECT_LT(wide, three);
  EXPECT_EQ(down_segments(*c, 16, three), 2);
  EXPECT_EQ(down_segments(*c, 16, wide), 2);
  EXPECT_GT(down_segments(*c, 16, wide - 1024), 2);
  // 8B at B = 16: its gate/up input, normed while staged, takes two segments even in three
  // stages' scratch, whose first is then as wide as it can be.
  c = preset_config("qwen3-8b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(scratch(*c, 16), three);
  // 0.6B at B = 16: its down input (3,072 columns) is staged whole.
  c = preset_config("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(down_segments(*c, 16, scratch(*c, 16)), 1);
}

TEST(PlanStep, TheRingTakesAStageMoreWhereALayerGivesEachWorkerHalfAMebibyteToStream) {
  // Per worker of 132: 0.6B's layer 233 KiB, 30B-A3B's attention 279 KiB, 1.7B's 745, 8B's 2.8 MiB.
  for (const auto& [preset, stages] : std::vector<std::pair<const char*, int>>{
           {"qwen3-0.6b", mk::kDefaultRingStages},
           {"qwen3-30b-a3b", mk::kDefaultRingStages},
           {"qwen3-1.7b", mk::kDefaultRingStages + 1},
           {"qwen3-8b", mk::kDefaultRingStages + 1}}) {
    auto c = preset_config(preset);
    ASSERT_TRUE(c.ok()) << c.status().message();
    for (int64_t b : {1, 16}) {
      auto plan = step_plan_of(*c, b);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      EXPECT_EQ(plan->ring_stages, stages) << preset << " B = " << b;
    }
    // And a step of one token leaves the ring room for them (attention's scratch once did not).
    EXPECT_LE(step_scratch_of(*c, 1), mk::scratch_leaving_stages(stages)) << preset;
  }
}

TEST(PlanStep, AStepOfWidePassesPlansItsScratchForThem) {
  const int warps = llm::kDecodeThreads / 32;
  auto c = preset_config("qwen3-0.6b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto scratch = [&](int64_t seqs, int pass_sets) { return step_scratch_of(*c, seqs, pass_sets); };
  // A step of 16 tokens takes passes of 16 whatever the backend's wide passes.
  EXPECT_EQ(scratch(16, llm::kWidePassSets), scratch(16, 1));
  // At B = 64 the down input (3,072 columns) of passes of 64 tokens takes as few segments in the
  // step's scratch as in three ring stages' (passes of 16 stage it whole in less).
  const int64_t groups = weight_tiling(*c, 132).rows_h / llm::kTileRows;
  const int64_t three = mk::scratch_leaving_stages(3), wide = scratch(64, llm::kWidePassSets);
  const auto down_segments = [&](int64_t bytes, int sets) {
    return llm::gemv_segments(c->intermediate_size, groups, 64, warps, bytes, sets);
  };
  EXPECT_GT(wide, scratch(64, 1));
  EXPECT_LE(wide, three);
  EXPECT_EQ(down_segments(wide, llm::kWidePassSets), down_segments(three, llm::kWidePassSets));
  EXPECT_EQ(down_segments(scratch(64, 1), 1), 1);
}

// On 132 SMs: a layer's share a worker is 2.8 MiB for 8B, 1.5 MiB for 4B, 900 KiB for Llama-3.2-1B,
// 745 KiB for 1.7B and 233 KiB for 0.6B (decode_plan.cc's wide_pass_sets has their measurements).
TEST(WidePassSets, DenseModelsWhoseLayersGiveEachWorker800KiBTakeWidePasses) {
  for (const auto& [preset, sets] : std::vector<std::pair<const char*, int>>{{"qwen3-8b", llm::kWidePassSets},
                                                                            {"qwen3-4b", llm::kWidePassSets},
                                                                            {"llama-3.2-1b", llm::kWidePassSets},
                                                                            {"qwen3-1.7b", 1},
                                                                            {"qwen3-0.6b", 1},
                                                                            {"qwen3-30b-a3b", 1}}) {
    auto c = preset_config(preset);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(wide_pass_sets(*c, 132), sets) << preset;
  }
  // The share is per worker: on half the SMs 1.7B's layer gives each 1.5 MiB.
  auto c = preset_config("qwen3-1.7b");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(wide_pass_sets(*c, 66), llm::kWidePassSets);
}

// KV splits: the fewest rounds of the fewest waves, and a round for the merge past one split; among
// those, the count whose tasks are nearest half the workers (decode_plan.cc's kv_splits).
TEST(DefaultTiling, AttentionSplitsInTheFewestRoundsIntoTasksNearestHalfTheWorkers) {
  auto c = preset_config("qwen3-0.6b");  // 8 KV heads
  ASSERT_TRUE(c.ok()) << c.status().message();
  const auto splits = [&](int64_t tokens, int64_t context) {
    return ceil_div(context, default_tiling(*c, tokens, context, 132).kv_split_len);
  };
  EXPECT_EQ(splits(1, 513), 8);   // 3 to 16 take one round of one wave: 64 tasks
  EXPECT_EQ(splits(2, 513), 4);   // 3 to 8 tie: 64 tasks
  EXPECT_EQ(splits(4, 513), 3);   // 3 and 4 tie (2 takes a second round): 96 tasks, not 128
  EXPECT_EQ(splits(8, 513), 1);   // 2 takes a round fewer, but then the merge's
  EXPECT_EQ(splits(16, 513), 1);  // 128 tasks already
  EXPECT_EQ(splits(1, 4097), 12);  // 12 to 16 take two rounds: 96 tasks, the nearest
}

TEST(DefaultTiling, ARoutedExpertGetsTheTileCountWhoseTilesForTheExpectedExpertsTakeTheFewestRounds) {
  auto c = preset_config("qwen3-30b-a3b");  // 128 experts, top-8; gate/up 96 groups, down 128 (22 fit the warps)
  ASSERT_TRUE(c.ok()) << c.status().message();
  struct Case {
    int64_t tokens, gate_up_tiles, down_tiles;
  };
  // B = 8: 50.3 experts expected. Six gate/up tiles an expert (rows_per_tile's, for two workers an
  // expert) are 302 tiles, three rounds of 132 workers; five are 252, two rounds of longer tiles.
  // Down keeps six: the fewest in which 22 groups a tile fit. B = 1 and 4 keep rows_per_tile's
  // 16 and 8, which fill one and two rounds; B = 16 has the fewest that fit already.
  for (const Case& k : std::vector<Case>{{1, 16, 16}, {4, 8, 8}, {8, 5, 6}, {16, 5, 6}}) {
    const Tiling t = default_tiling(*c, k.tokens, 512, 132);
    EXPECT_EQ(ceil_div(c->moe->moe_intermediate_size, t.rows_xi), k.gate_up_tiles) << "B = " << k.tokens;
    EXPECT_EQ(ceil_div(c->hidden_size, t.rows_dn), k.down_tiles) << "B = " << k.tokens;
  }
}

}  // namespace
}  // namespace evt::model
