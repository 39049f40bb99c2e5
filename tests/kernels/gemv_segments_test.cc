// The GEMV's segments (kernels/llm/gemv.h): when a pass's staged rows do not fit the scratch, the
// stage is refilled a segment of k-blocks at a time mid-stream, and the outputs are those of one
// segment, bit for bit (the tiles are added in the same order), and match a double reference.
// And its rounds: a task of several row panels gives what one task per panel gives, bit for bit.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/block_scratch.h"
#include "kernels/llm/gemv.h"
#include "kernels/tile_body.h"

namespace evt::kernels::llm {
namespace {

// A host block (one thread) whose scratch is `bytes` long.
class SmallScratchBlock {
 public:
  explicit SmallScratchBlock(int64_t bytes) : buffer_(static_cast<size_t>(bytes / 16 + 1)), bytes_(bytes) {}
  int thread() const { return 0; }
  int threads() const { return 1; }
  void sync() const {}
  Scratch scratch() const { return Scratch{reinterpret_cast<unsigned char*>(buffer_.data()), bytes_}; }
  CopyingStreamReader weights(const WeightStream& s) const { return CopyingStreamReader(s, host_chunk_buffer()); }

 private:
  mutable std::vector<__int128> buffer_;  // 16-byte aligned
  int64_t bytes_;
};

// The same block taking passes of up to kSets sets of 16 tokens (gemv.h's kPassSets).
template <int kSets>
class WideBlock : public SmallScratchBlock {
 public:
  static constexpr int kPassSets = kSets;
  using SmallScratchBlock::SmallScratchBlock;
};

struct Problem {
  int64_t rows, cols, tokens;
  std::vector<uint16_t> w, norm_w;  // tiled rows x cols, and cols norm weights
  std::vector<float> x;             // tokens x cols
  std::vector<uint16_t> x_bf16;     // the same rounded, as a normed input is (the residual stream)
};

// Rows x cols weights in panels of `panel_rows` rows (0: one panel), tokens x cols inputs.
Problem make_problem(int64_t rows, int64_t cols, int64_t tokens, int64_t panel_rows = 0) {
  Problem p{rows, cols, tokens, {}, {}, {}, {}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint16_t> plain(static_cast<size_t>(rows * cols));
  for (auto& v : plain) v = f32_to_bf16(u(rng));
  p.w.resize(static_cast<size_t>(tiled_shape(rows, cols, panel_rows).bytes() / 2));
  pack_tiled(rows, cols, panel_rows, [&](int64_t n) { return plain.data() + n * cols; }, p.w.data());
  for (int64_t k = 0; k < cols; ++k) p.norm_w.push_back(f32_to_bf16(0.5f + u(rng) * 0.25f));
  for (int64_t i = 0; i < tokens * cols; ++i) p.x.push_back(u(rng));
  for (float v : p.x) p.x_bf16.push_back(f32_to_bf16(v));
  return p;
}

// Floats, or normed bf16.
GemvInput input_of(const Problem& pr, bool norm) {
  GemvInput in{.x = pr.x.data(), .ld = pr.cols, .tokens = pr.tokens};
  if (norm) {
    in.x = pr.x_bf16.data();
    in.bf16 = true;
    in.norm_w = pr.norm_w.data();
    in.norm_len = pr.cols;
    in.eps = 1e-6f;
  }
  return in;
}

// The tile over every row of the problem, on a block with `scratch` bytes: tokens x rows outputs.
template <class Block>
std::vector<float> run(const Problem& pr, const Block& b, bool norm) {
  std::vector<float> out(static_cast<size_t>(pr.tokens * pr.rows), NAN);
  gemv_run(b, gemv_task(1, input_of(pr, norm), pr.w.data(), tiled_shape(pr.rows, pr.cols), 0, pr.rows / kTileRows, 0,
                        pr.cols, pr.rows, GemvOutput{.out = out.data(), .ld = pr.rows}));
  return out;
}

// The problem's rows in panels of `panel` groups: one task of every panel as rounds, or one task
// per panel.
template <class Block>
std::vector<float> run_panels(const Problem& pr, const Block& b, bool norm, int64_t panel, bool as_rounds) {
  std::vector<float> out(static_cast<size_t>(pr.tokens * pr.rows), NAN);
  const TiledShape shape = tiled_shape(pr.rows, pr.cols, panel * kTileRows);
  const auto task = [&](int64_t g0, int64_t groups) {
    return gemv_task(1, input_of(pr, norm), pr.w.data(), shape, g0, groups, 0, pr.cols, pr.rows,
                     GemvOutput{.out = out.data(), .ld = pr.rows});
  };
  if (as_rounds) {
    GemvTask j = task(0, panel);
    j.rounds = (shape.groups + panel - 1) / panel;
    gemv_run(b, j);
  } else {
    for (int64_t g0 = 0; g0 < shape.groups; g0 += panel) gemv_run(b, task(g0, std::min(panel, shape.groups - g0)));
  }
  return out;
}

// What the plan makes of the block's scratch for this problem.
template <class Block>
GemvPlan plan_of(const Problem& pr, const Block& b) {
  return gemv_plan(b, gemv_task(1, GemvInput{.x = pr.x.data(), .ld = pr.cols, .tokens = pr.tokens}, pr.w.data(),
                                tiled_shape(pr.rows, pr.cols), 0, pr.rows / kTileRows, 0, pr.cols, pr.rows, GemvOutput{}));
}

// Scratch for the sums of `groups` groups and `tokens` rows of `kblocks` staged k-blocks.
int64_t scratch_for(int64_t groups, int64_t tokens, int64_t kblocks) {
  return kGemvHeaderBytes + gemv_slot_bytes(groups, kHostWarps) + tokens * staged_row(kblocks) * 2;
}

// What passes of four sets would take besides what scratch_for counts, their slots beside the
// stage: three more sets' slots and header. In the stage, they leave the wide blocks more room.
int64_t wide_slots_and_header(int64_t groups) {
  return gemv_slot_bytes(groups, kHostWarps, 4) - gemv_slot_bytes(groups, kHostWarps) + 3 * kGemvHeaderBytes;
}

TEST(GemvSegments, ASegmentedPassGivesTheOneSegmentOutputsBitForBit) {
  // 2 groups x 41 k-blocks (the last one partial), 5 tokens; segments of 3 k-blocks end inside
  // the 8-k-block chunks, and the last segment is short.
  const Problem pr = make_problem(32, 40 * kTileCols + 8, 5);
  const SmallScratchBlock small(scratch_for(2, 5, 3) + 40);
  const GemvPlan p = plan_of(pr, small);
  ASSERT_EQ(p.pass_tokens, 5);
  ASSERT_EQ(p.seg_kblocks, 3);
  ASSERT_EQ(p.passes, 1);
  // What the step's planning counts for this tile (model/decode_plan.cc): 41 k-blocks in 3s.
  EXPECT_EQ(gemv_segments(pr.cols, 2, pr.tokens, kHostWarps, scratch_for(2, 5, 3) + 40), 14);
  EXPECT_EQ(gemv_segments(pr.cols, 2, pr.tokens, kHostWarps, scratch_for(2, 5, 41)), 1);
  for (bool norm : {false, true}) {
    const std::vector<float> whole = run(pr, SerialBlock(nullptr), norm);
    EXPECT_EQ(run(pr, small, norm), whole) << (norm ? "with" : "without") << " the norm";
  }
}

TEST(GemvSegments, SegmentedOutputsMatchADoubleReference) {
  // 3 groups, 17 tokens (two passes: 16 and 1), segments of 3 k-blocks: the room of 4.99
  // k-blocks a token does not take 4, whose staged rows staged_row pads by one block.
  const Problem pr = make_problem(48, 23 * kTileCols, 17);
  const SmallScratchBlock small(scratch_for(3, 16, 5) - 1);
  const GemvPlan p = plan_of(pr, small);
  ASSERT_EQ(p.pass_tokens, 16);
  ASSERT_EQ(p.seg_kblocks, 3);
  ASSERT_EQ(p.passes, 2);
  EXPECT_EQ(gemv_segments(pr.cols, 3, pr.tokens, kHostWarps, scratch_for(3, 16, 5) - 1), 8);  // 23 k-blocks in 3s
  const std::vector<float> out = run(pr, small, false);
  for (int64_t t = 0; t < pr.tokens; ++t) {
    for (int64_t n = 0; n < pr.rows; ++n) {
      double want = 0;
      for (int64_t k = 0; k < pr.cols; ++k) {
        const float x = bf16_to_f32(f32_to_bf16(pr.x[t * pr.cols + k]));
        want += static_cast<double>(x) * bf16_to_f32(pr.w[tiled_offset(tiled_shape(pr.rows, pr.cols), n, k)]);
      }
      EXPECT_NEAR(out[t * pr.rows + n], want, 1e-3 * (1 + std::abs(want))) << "token " << t << " row " << n;
    }
  }
}

TEST(GemvWidePasses, PassesOfSeveralSetsGiveThePassesOfSixteenBitForBit) {
  struct Shape {
    int64_t groups, kblocks, tokens;
    int64_t stage_kblocks;  // k-blocks of 16 tokens the scratch stages at a time
  };
  // 17 to 100 tokens: two sets, a partial third, four, and passes of four sets then a partial one;
  // 20 groups: two a warp on the host's 11 warps; 2 groups: several warps a group; segments of 3
  // k-blocks of 16 tokens, which are fewer k-blocks of the wider passes' rows.
  for (const Shape& sh : {Shape{3, 7, 17, 7}, Shape{2, 23, 40, 3}, Shape{20, 5, 64, 5}, Shape{5, 9, 100, 9},
                          Shape{2, 23, 64, 3}}) {
    const Problem pr = make_problem(sh.groups * kTileRows, sh.kblocks * kTileCols - 8, sh.tokens);
    // Room for the same staged bytes with four sets' slots beside the stage: their rows would
    // take a quarter of the k-blocks, and with the slots in the stage take more.
    const int64_t bytes = scratch_for(sh.groups, kPassTokens, sh.stage_kblocks) + wide_slots_and_header(sh.groups);
    const SmallScratchBlock narrow(bytes);
    const WideBlock<2> two(bytes);
    const WideBlock<4> four(bytes);
    const GemvPlan wide_plan = gemv_plan(four, gemv_task(1, input_of(pr, false), pr.w.data(),
                                                         tiled_shape(pr.rows, pr.cols), 0, sh.groups, 0, pr.cols,
                                                         pr.rows, GemvOutput{}));
    EXPECT_GT(wide_plan.pass_tokens, kPassTokens) << sh.tokens << " tokens";
    for (bool norm : {false, true}) {
      const std::vector<float> sixteen = run(pr, narrow, norm);
      EXPECT_EQ(run(pr, two, norm), sixteen) << sh.groups << " groups, " << sh.tokens << " tokens in sets of two, "
                                             << (norm ? "with" : "without") << " the norm";
      EXPECT_EQ(run(pr, four, norm), sixteen) << sh.groups << " groups, " << sh.tokens << " tokens in sets of four, "
                                              << (norm ? "with" : "without") << " the norm";
      EXPECT_EQ(std::count_if(sixteen.begin(), sixteen.end(), [](float v) { return std::isnan(v); }), 0);
    }
  }
}

TEST(GemvWidePasses, RoundsOfWidePassesGiveWhatOneTaskPerPanelGives) {
  // 3 panels of 12 groups (two a warp, then one), 40 tokens in one pass of three sets.
  const Problem pr = make_problem(30 * kTileRows, 4 * kTileCols, 40, 12 * kTileRows);
  const WideBlock<4> four(scratch_for(12, 40, 4) + wide_slots_and_header(12));
  for (bool norm : {false, true}) {
    EXPECT_EQ(run_panels(pr, four, norm, 12, true), run_panels(pr, SerialBlock(nullptr), norm, 12, false))
        << (norm ? "with" : "without") << " the norm";
  }
}

TEST(GemvRounds, RoundsGiveWhatOneTaskPerPanelGivesBitForBit) {
  struct Shape {
    int64_t groups, panel, kblocks, tokens;
    int64_t scratch;  // 0: the serial block's
  };
  // Panels of 2 groups, the last of 1; panels wider than the host's 11 warps (12, 12, 6 groups),
  // so that a round of two groups a warp is followed by a narrower one of one; 17 tokens in two
  // passes over segments of 3 k-blocks, which every round after the first restages from the start.
  for (const Shape& sh : {Shape{5, 2, 4, 1, 0}, Shape{30, 12, 3, 3, 0},
                          Shape{5, 2, 23, 17, scratch_for(2, 16, 5) - 1}}) {
    const Problem pr = make_problem(sh.groups * kTileRows, sh.kblocks * kTileCols - 8, sh.tokens, sh.panel * kTileRows);
    const SmallScratchBlock small(sh.scratch > 0 ? sh.scratch : scratch_for(sh.panel, 16, sh.kblocks) + 64);
    for (bool norm : {false, true}) {
      const std::vector<float> per_panel = run_panels(pr, small, norm, sh.panel, false);
      EXPECT_EQ(run_panels(pr, small, norm, sh.panel, true), per_panel)
          << sh.groups << " groups in panels of " << sh.panel << ", " << sh.tokens << " tokens, "
          << (norm ? "with" : "without") << " the norm";
      EXPECT_EQ(std::count_if(per_panel.begin(), per_panel.end(), [](float v) { return std::isnan(v); }), 0);
    }
  }
}

TEST(GemvWidePasses, TheirSlotsLieInTheStage) {
  // 2 groups (one a warp), 23 k-blocks, 64 tokens; the scratch holds the headers and four sets'
  // slots, and in the same bytes 11 staged k-blocks of 64 tokens, not 12.
  const Problem pr = make_problem(2 * kTileRows, 23 * kTileCols, 64);
  const int64_t slots = gemv_slot_bytes(2, kHostWarps, 4);
  ASSERT_GE(slots, 64 * staged_row(11) * 2);
  ASSERT_LT(slots, 64 * staged_row(12) * 2);
  const int64_t bytes = 4 * kGemvHeaderBytes + slots;
  EXPECT_EQ(gemv_min_scratch(2, kHostWarps, 4), bytes);
  EXPECT_EQ(gemv_stage_room(bytes, 2, kHostWarps, 4), slots);
  const WideBlock<4> four(bytes);
  const GemvPlan p = plan_of(pr, four);
  EXPECT_EQ(static_cast<void*>(p.stage), static_cast<void*>(p.slots));
  EXPECT_EQ(p.pass_tokens, 64);
  EXPECT_EQ(p.seg_kblocks, 11);
  EXPECT_EQ(gemv_segments(pr.cols, 2, pr.tokens, kHostWarps, bytes, 4), 3);
  // Passes of 16 keep their slots beside the stage.
  const SmallScratchBlock narrow(bytes);
  const GemvPlan pn = plan_of(pr, narrow);
  EXPECT_EQ(static_cast<void*>(pn.stage), static_cast<void*>(gemv_slot(pn, pn.warps, 0)));
  EXPECT_EQ(gemv_stage_room(bytes, 2, kHostWarps), bytes - kGemvHeaderBytes - gemv_slot_bytes(2, kHostWarps));
  for (bool norm : {false, true}) {
    EXPECT_EQ(run(pr, four, norm), run(pr, narrow, norm)) << (norm ? "with" : "without") << " the norm";
  }
}

TEST(GemvWidePasses, AScratchWithoutRoomForTheSetsSlotsIsRefused) {
  const Problem pr = make_problem(2 * kTileRows, 3 * kTileCols, 40);
  const int64_t narrow_least = gemv_min_scratch(2, kHostWarps);
  EXPECT_NO_THROW(run(pr, SmallScratchBlock(narrow_least), false));
  EXPECT_THROW(run(pr, WideBlock<4>(narrow_least), false), std::logic_error);
  EXPECT_NO_THROW(run(pr, WideBlock<4>(gemv_min_scratch(2, kHostWarps, 4)), false));
}

TEST(GemvRounds, ATaskOfRoundsMustReadWholePanelsEveryColumn) {
  const Problem pr = make_problem(4 * kTileRows, 3 * kTileCols, 1, 2 * kTileRows);
  std::vector<float> out(static_cast<size_t>(pr.rows));
  const TiledShape shape = tiled_shape(pr.rows, pr.cols, 2 * kTileRows);
  const auto rounds_of = [&](int64_t g0, int64_t groups, int64_t k0) {
    GemvTask j = gemv_task(1, input_of(pr, false), pr.w.data(), shape, g0, groups, k0, pr.cols, pr.rows,
                           GemvOutput{.out = out.data(), .ld = pr.rows});
    j.rounds = 2;
    return j;
  };
  const SerialBlock b(nullptr);
  EXPECT_THROW(gemv_run(b, rounds_of(1, 2, 0)), std::logic_error);          // not at a panel's start
  EXPECT_THROW(gemv_run(b, rounds_of(0, 1, 0)), std::logic_error);          // part of a panel
  EXPECT_THROW(gemv_run(b, rounds_of(0, 2, kTileCols)), std::logic_error);  // not every column
  EXPECT_THROW(gemv_run(b, rounds_of(2, 2, 0)), std::logic_error);          // a last round past the matrix
  EXPECT_NO_THROW(gemv_run(b, rounds_of(0, 2, 0)));
}

}  // namespace
}  // namespace evt::kernels::llm
