// The MoE block's phase 2 tile functions (docs/moe_decode.md) on a two-layer model, layer 0
// dense and layer 1 sparse: each stage's body (on the host's one-thread block, reading its weight
// stream) against its registry row's reference on the same inputs, outputs poisoned first; the
// bookkeeping and routing bit for bit, the projections within a float tolerance; and the whole
// chain of references against phase 1's moe_gate_up + moe_down, which the MoE fixture ties to
// Hugging Face.

#include <gtest/gtest.h>

#include <array>
#include <random>

#include "kernels/llm/moe_combine_residual.h"
#include "kernels/llm/moe_expert_down.h"
#include "kernels/llm/moe_expert_gate_up.h"
#include "kernels/llm/moe_layout.h"
#include "kernels/llm/moe_plan.h"
#include "kernels/llm/moe_router.h"
#include "kernels/moe_block_case.h"
#include "kernels/tile_body.h"

namespace evt::kernels::llm::testing {
namespace {

// The bodies on the host's one-thread block, by row.
const std::map<std::string, CpuTileFn>& cpu_bodies() {
  static const std::map<std::string, CpuTileFn> kBodies = {
      {"moe_router", &run_body_on_cpu<&moe_router_body<SerialBlock>, 3, 1>},
      {"moe_plan", &run_body_on_cpu<&moe_plan_body<SerialBlock>, 4, 9>},
      {"moe_expert_gate_up", &run_body_on_cpu<&moe_expert_gate_up_body<SerialBlock>, 7, 1>},
      {"moe_expert_down", &run_body_on_cpu<&moe_expert_down_body<SerialBlock>, 7, 1>},
      {"moe_combine_residual", &run_body_on_cpu<&moe_combine_residual_body<SerialBlock>, 4, 1>},
  };
  return kBodies;
}

// The named buffers as a body reads them.
std::vector<DevBuffer> dev_buffers(Buffers& bufs, const std::vector<std::string>& names) {
  std::vector<DevBuffer> out;
  for (const std::string& name : names) {
    const BufferView v = bufs.all.at(name).view();
    DevBuffer d{.data = v.data, .rank = static_cast<int>(v.shape.size()), .numel = v.numel};
    for (size_t k = 0; k < v.shape.size(); ++k) d.shape[k] = v.shape[k];
    out.push_back(d);
  }
  return out;
}

class MoeBlock : public ::testing::Test, public MoeBlockCase {
 protected:
  // Every stage's body against its reference on layer l, from the same inputs (each reference's
  // outputs stay in the buffers for the next stage), with the wait counts each sets; and the plan's
  // tables against its rows.
  void expect_stages_match(int64_t l) {
    for (const MoeStage& s : stages()) {
      SCOPED_TRACE(std::string(s.row) + " layer " + std::to_string(l));
      const TileFunction* fn = Registry::builtins().find(s.row);
      ASSERT_NE(fn, nullptr);
      ASSERT_EQ(fn->num_reads, static_cast<int>(s.reads.size()));
      ASSERT_EQ(fn->num_writes, static_cast<int>(s.writes.size()));
      b.poison(s.writes);
      Counts body_counts, reference_counts;
      run(cpu_bodies().at(s.row), l, s.tiles, s.reads, s.writes, &body_counts);
      std::map<std::string, Buffers::Buf> got;
      for (const std::string& w : s.writes) got[w] = b.all.at(w);
      ASSERT_NO_FATAL_FAILURE(expect_outputs_match(s, got, run_reference(s, l, &reference_counts)));
      EXPECT_EQ(body_counts.set, reference_counts.set);
      if (std::string(s.row) == "moe_plan") expect_plan_tables(l, reference_counts);
    }
  }

  // Every expert's ACTX and the layer's DONE count its tiles; each gate/up tile's entry names its
  // expert and that expert's rows; none past the last routed expert's tiles.
  void expect_plan_tables(int64_t l, Counts& counts) {
    EXPECT_EQ(counts.set.size(), static_cast<size_t>(kE + 1));
    const int32_t* gu = b.all.at("gu_ptr").i32.data() + l * (kE + 1);
    const int32_t* dn = b.all.at("dn_ptr").i32.data() + l * (kE + 1);
    for (int64_t e = 0; e < kE; ++e) EXPECT_EQ((counts.set[{0, l * kE + e}]), gu[e + 1] - gu[e]) << "ACTX " << e;
    EXPECT_EQ((counts.set[{1, l}]), dn[kE]) << "DONE";
    const int32_t* entries = b.all.at("tile_expert").i32.data() + l * kMaxGu * kTileEntryWords;
    const int32_t* indptr = b.all.at("exp_indptr").i32.data();
    for (int64_t i = 0; i < kMaxGu; ++i) {
      const MoeTileEntry t = moe_tile_entry(entries, i);
      if (i >= gu[kE]) {
        EXPECT_EQ(t.expert, -1) << i;
        EXPECT_EQ(t.rows, 0) << i;
        continue;
      }
      ASSERT_TRUE(t.expert >= 0 && t.expert < kE) << i << ": " << t.expert;
      EXPECT_TRUE(gu[t.expert] <= i && i < gu[t.expert + 1]) << i << ": " << t.expert;
      EXPECT_EQ(t.row0, indptr[t.expert]) << i;
      EXPECT_EQ(t.rows, indptr[t.expert + 1] - indptr[t.expert]) << i;
    }
    expect_streams_follow_triggers(l, gu[kE], dn[kE]);
  }

  // StreamAfter::kGuards (both rows): the loader fills a tile's stream without learning whether
  // its trigger released it, so a tile the trigger skips (past the routed experts' ranges, the
  // tables' totals) must stream nothing, and every tile it releases its expert's weights.
  void expect_streams_follow_triggers(int64_t l, int32_t gate_up_tiles, int32_t down_tiles) {
    const std::vector<DevBuffer> gu_reads =
        dev_buffers(b, {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr", "tile_expert"});
    const std::vector<DevBuffer> dn_reads =
        dev_buffers(b, {"cfg", "wtab", "act_s", "exp_indptr", "sorted_w", "dn_ptr", "tile_expert"});
    std::vector<DevBuffer> act = dev_buffers(b, {"act_s"}), y = dev_buffers(b, {"y_s"});
    const SerialBlock block(nullptr);
    for (int64_t i = 0; i < kMaxGu; ++i) {
      const int64_t tile[2] = {l, i};
      EXPECT_EQ(moe_expert_gate_up_stream(block, tile, gu_reads.data(), act.data()).chunks() > 0, i < gate_up_tiles)
          << "gate/up tile " << i;
    }
    for (int64_t i = 0; i < kMaxDn; ++i) {
      const int64_t tile[2] = {l, i};
      EXPECT_EQ(moe_expert_down_stream(block, tile, dn_reads.data(), y.data()).chunks() > 0, i < down_tiles)
          << "down tile " << i;
    }
  }
};

TEST_F(MoeBlock, BodiesMatchReferencesStageByStage) {
  for (int64_t l : {0, 1}) {
    ASSERT_NO_FATAL_FAILURE(expect_stages_match(l));
    if (l == 0) {  // a dense layer: one expert, 5 tiles of its 40 rows
      const std::vector<int32_t>& gu = b.all.at("gu_ptr").i32;
      EXPECT_EQ(std::vector<int32_t>(gu.begin(), gu.begin() + 3), (std::vector<int32_t>{0, 5, 5}));
    }
  }
  // Layer 1 is sparse: 10 (token, slot) rows over the experts, 3 gate/up tiles per routed expert.
  const std::vector<int32_t>& gu = b.all.at("gu_ptr").i32;
  EXPECT_EQ(b.all.at("exp_indptr").i32.back(), kT * kK);
  int routed = 0;
  for (int64_t e = 0; e < kE; ++e) routed += gu[kE + 1 + e + 1] > gu[kE + 1 + e];
  EXPECT_GE(routed, 2);
  EXPECT_EQ(gu[2 * (kE + 1) - 1], routed * 3);
}

// A step of 300 tokens: the router runs 19 passes of 16 tokens, the plan places 600 (token, slot)
// rows, and each expert's tiles run its ~100 rows in GEMV passes of 16; every stage still matches
// its reference.
TEST_F(MoeBlock, ManyTokensMatchReferencesStageByStage) {
  constexpr int64_t kTokens = 300;
  std::mt19937 rng(7);
  add_step_buffers(kTokens, rng);
  for (int64_t l : {0, 1}) ASSERT_NO_FATAL_FAILURE(expect_stages_match(l));
  EXPECT_EQ(b.all.at("exp_indptr").i32.back(), kTokens * kK);
}

// The host's one-thread block with only `bytes` of scratch.
class SmallScratchBlock : public SerialBlock {
 public:
  SmallScratchBlock(WaitCountSetter* setter, int64_t bytes) : SerialBlock(setter), bytes_(bytes) {}
  Scratch scratch() const { return Scratch{SerialBlock::scratch().data, bytes_}; }

 private:
  int64_t bytes_;
};

TEST_F(MoeBlock, PlanInLittleScratchPlacesRowsInChunks) {
  // 16 tokens, 32 (token, slot) rows: in little scratch the body stages and places 10 rows at a
  // time (the last chunk 2).
  constexpr int64_t kTokens = 16;
  Buffers bufs;
  bufs.all["cfg"] = b.all.at("cfg");
  bufs.all["wtab"] = b.all.at("wtab");
  bufs.add("x_mid", {kTokens, kH}, 'b');
  std::vector<float>& logits = bufs.add("router_logits", {kTokens, kE}, 'f').f32;
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0, 1);
  for (float& v : logits) v = d(rng);
  logits[kE + 1] = logits[kE + 2] = 9;  // token 1: its two best tie, and go in index order
  bufs.add("route_ids", {kTokens, kXK}, 'i');
  bufs.add("route_w", {kTokens, kXK}, 'f');
  bufs.add("exp_indptr", {kE + 1}, 'i');
  bufs.add("perm", {kTokens * kXK}, 'i');
  bufs.add("sorted_w", {kTokens * kXK}, 'f');
  bufs.add("pos", {kTokens, kXK}, 'i');
  bufs.add("gu_ptr", {2, kE + 1}, 'i');
  bufs.add("dn_ptr", {2, kE + 1}, 'i');
  bufs.add("tile_expert", {2, kMaxGu, kTileEntryWords}, 'i');  // 6 routed experts x 3 tiles
  const std::vector<std::string> reads = {"cfg", "wtab", "x_mid", "router_logits"};
  const int64_t bytes = moe_plan_scratch_bytes(kE, kK, 1) + 9 * 8;  // the host's one warp, chunks of 10 rows
  for (int64_t l : {0, 1}) {
    SCOPED_TRACE("layer " + std::to_string(l));
    bufs.poison(kPlanWrites);
    Counts want_counts, got_counts;
    const std::vector<BufferView> rv = bufs.views(reads), wv = bufs.views(kPlanWrites);
    const int64_t tile[1] = {l};
    Registry::builtins().find("moe_plan")->cpu(
        TileArgs{.tile = std::span<const int64_t>(tile, 1), .reads = rv, .writes = wv, .wait_counts = &want_counts});
    const Buffers want = bufs;
    bufs.poison(kPlanWrites);
    const std::vector<DevBuffer> r = dev_buffers(bufs, reads), w = dev_buffers(bufs, kPlanWrites);
    moe_plan_body(SmallScratchBlock(&got_counts, bytes), tile, r.data(), w.data());
    for (const std::string& name : kPlanWrites) {
      EXPECT_EQ(bufs.all.at(name).i32, want.all.at(name).i32) << name;
      EXPECT_EQ(bufs.all.at(name).f32, want.all.at(name).f32) << name;
    }
    EXPECT_EQ(got_counts.set, want_counts.set);
  }
  EXPECT_EQ(bufs.all.at("route_ids").i32[kXK], 1);
  EXPECT_EQ(bufs.all.at("route_ids").i32[kXK + 1], 2);
}

TEST_F(MoeBlock, UnreleasedTilesAndDenseRoutersStreamNothing) {
  b.all.at("gu_ptr").i32 = {0, 5, 5, 5, 5, 5, 5, 0, 3, 3, 6, 6, 6, 6};
  b.all.at("exp_indptr").i32 = {0, 4, 4, 7, 7, 7, 7};
  std::vector<int32_t>& tile_expert = b.all.at("tile_expert").i32;  // as the plan fills it from gu_ptr
  const auto entries = [&](int64_t l, int64_t first, int64_t n, std::array<int32_t, kTileEntryWords> entry) {
    for (int64_t i = first; i < first + n; ++i) {
      std::copy(entry.begin(), entry.end(), tile_expert.begin() + (l * kMaxGu + i) * kTileEntryWords);
    }
  };
  entries(0, 0, kMaxGu, {-1, 0, 0});
  entries(1, 0, kMaxGu, {-1, 0, 0});
  entries(0, 0, 5, {0, 0, 4});
  entries(1, 0, 3, {0, 0, 4});
  entries(1, 3, 3, {2, 4, 3});
  const std::vector<DevBuffer> r = dev_buffers(b, {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr", "tile_expert"});
  std::vector<DevBuffer> w = dev_buffers(b, {"act_s"});
  const SerialBlock block(nullptr);
  const int64_t released[2] = {1, 5}, unreleased[2] = {1, 6}, dense[2] = {0, 0};
  const WeightStream s = moe_expert_gate_up_stream(block, released, r.data(), w.data());
  EXPECT_GT(s.chunks(), 0);
  // Tile 5 is expert 2's third: its rows start 16 outputs (two fused groups) into expert 2's matrix.
  EXPECT_EQ(s.base, reinterpret_cast<const unsigned char*>(experts_gate_up.data() + 2 * tiled_shape(2 * kIM, kH).bytes() / 2));
  EXPECT_EQ(s.g0, 2);
  EXPECT_EQ(moe_expert_gate_up_stream(block, unreleased, r.data(), w.data()).chunks(), 0);
  DevBuffer logits{.data = b.all.at("router_logits").f32.data(), .shape = {kT, kE}, .rank = 2, .numel = kT * kE};
  EXPECT_EQ(moe_router_stream(block, dense, r.data(), &logits).chunks(), 0);
}

TEST_F(MoeBlock, ChainEqualsPhaseOneBlock) {
  const Registry& reg = Registry::builtins();
  auto cpu = [&](const char* name) { return reg.find(name)->cpu; };
  for (int64_t l : {0, 1}) {
    SCOPED_TRACE("layer " + std::to_string(l));
    run(cpu("moe_router"), l, 1, {"cfg", "wtab", "x_mid"}, {"router_logits"});
    run(cpu("moe_plan"), l, 0, {"cfg", "wtab", "x_mid", "router_logits"}, kPlanWrites);
    const std::vector<int32_t> ids2 = b.all.at("route_ids").i32;
    const std::vector<float> w2 = b.all.at("route_w").f32;
    run(cpu("moe_expert_gate_up"), l, kMaxGu, {"cfg", "wtab", "x_mid", "exp_indptr", "perm", "gu_ptr", "tile_expert"}, {"act_s"});
    run(cpu("moe_expert_down"), l, kMaxDn, {"cfg", "wtab", "act_s", "exp_indptr", "sorted_w", "dn_ptr", "tile_expert"}, {"y_s"});
    run(cpu("moe_combine_residual"), l, kNH, {"cfg", "y_s", "pos", "x_mid"}, {"x"});

    run(cpu("moe_gate_up"), l, kT, {"cfg", "wtab", "x_mid"}, {"act", "route_ids", "route_w"});
    // Phase 1 routes from its own logits in double, phase 2 from the float logits buffer.
    EXPECT_EQ(b.all.at("route_ids").i32, ids2);
    for (size_t i = 0; i < w2.size(); ++i) EXPECT_NEAR(b.all.at("route_w").f32[i], w2[i], 1e-6) << i;
    run(cpu("moe_down"), l, kNH, {"cfg", "wtab", "act", "route_ids", "route_w", "x_mid"}, {"x1"});
    // Both round their sums to bf16, which may land an ulp apart.
    const std::vector<float> ours = b.all.at("x").floats(), phase1 = b.all.at("x1").floats();
    const size_t half = static_cast<size_t>(kT * kH), base = (l + 1) % 2 * half;
    for (size_t i = base; i < base + half; ++i) {
      ASSERT_TRUE(std::isfinite(ours[i])) << i;
      ASSERT_NEAR(ours[i], phase1[i], 1e-5 + std::fabs(phase1[i]) / 128) << i;
    }
  }
}

}  // namespace
}  // namespace evt::kernels::llm::testing
