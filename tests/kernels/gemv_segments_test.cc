// The GEMV's segments (kernels/llm/gemv.h): when a pass's staged rows do not fit the scratch, the
// stage is refilled a segment of k-blocks at a time mid-stream, and the outputs are those of one
// segment, bit for bit (the tiles are added in the same order), and match a double reference.

#include <gtest/gtest.h>

#include <cmath>
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

struct Problem {
  int64_t rows, cols, tokens;
  std::vector<uint16_t> w, norm_w;  // tiled rows x cols, and cols norm weights
  std::vector<float> x;             // tokens x cols
};

Problem make_problem(int64_t rows, int64_t cols, int64_t tokens) {
  Problem p{rows, cols, tokens, {}, {}, {}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint16_t> plain(static_cast<size_t>(rows * cols));
  for (auto& v : plain) v = f32_to_bf16(u(rng));
  p.w.resize(static_cast<size_t>(tiled_shape(rows, cols).bytes() / 2));
  pack_tiled(rows, cols, rows, [&](int64_t n) { return plain.data() + n * cols; }, p.w.data());
  for (int64_t k = 0; k < cols; ++k) p.norm_w.push_back(f32_to_bf16(0.5f + u(rng) * 0.25f));
  for (int64_t i = 0; i < tokens * cols; ++i) p.x.push_back(u(rng));
  return p;
}

// The tile over every row of the problem, on a block with `scratch` bytes: tokens x rows outputs.
template <class Block>
std::vector<float> run(const Problem& pr, const Block& b, bool norm) {
  std::vector<float> out(static_cast<size_t>(pr.tokens * pr.rows), NAN);
  GemvInput in{.x = pr.x.data(), .ld = pr.cols, .tokens = pr.tokens};
  if (norm) {
    in.norm_w = pr.norm_w.data();
    in.norm_len = pr.cols;
    in.eps = 1e-6f;
  }
  gemv_run(b, gemv_task(1, in, pr.w.data(), tiled_shape(pr.rows, pr.cols), 0, pr.rows / kTileRows, 0, pr.cols, pr.rows,
                        GemvOutput{.out = out.data(), .ld = pr.rows}));
  return out;
}

// What the plan makes of the block's scratch for this problem.
GemvPlan plan_of(const Problem& pr, const SmallScratchBlock& b) {
  return gemv_plan(b, gemv_task(1, GemvInput{.x = pr.x.data(), .ld = pr.cols, .tokens = pr.tokens}, pr.w.data(),
                                tiled_shape(pr.rows, pr.cols), 0, pr.rows / kTileRows, 0, pr.cols, pr.rows, GemvOutput{}));
}

// Scratch for the sums of `groups` groups and `tokens` rows of `kblocks` staged k-blocks.
int64_t scratch_for(int64_t groups, int64_t tokens, int64_t kblocks) {
  return kGemvHeaderBytes + gemv_slot_bytes(groups, kHostWarps) + tokens * staged_row(kblocks) * 2;
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

}  // namespace
}  // namespace evt::kernels::llm
