// The projections' weight layout (kernels/llm/weight_tiles.h) and the weight stream that reads it
// (kernels/weight_stream.h): row panels, and the contiguous runs a panel's tile streams.

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/llm/weight_tiles.h"
#include "kernels/weight_stream.h"

namespace evt::kernels::llm {
namespace {

// 7 groups in panels of 3 (the last of 1), 5 k-blocks: every tile has one place, and a panel's
// tiles are one run, k-block-major.
TEST(WeightTiles, PanelsAreKBlockMajorRunsOneAfterAnother) {
  const TiledShape s = tiled_shape(7 * kTileRows - 5, 5 * kTileCols - 3, 3 * kTileRows);
  ASSERT_EQ(s.groups, 7);
  ASSERT_EQ(s.kblocks, 5);
  ASSERT_EQ(s.panel, 3);
  std::set<int64_t> seen;
  for (int64_t g = 0; g < s.groups; ++g) {
    for (int64_t kb = 0; kb < s.kblocks; ++kb) seen.insert(s.tile_index(g, kb));
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), s.tiles());
  EXPECT_EQ(*seen.rbegin(), s.tiles() - 1);
  EXPECT_EQ(s.tile_index(3, 0), 3 * 5);      // panel 1 starts after panel 0's 3 x 5 tiles
  EXPECT_EQ(s.tile_index(4, 2), 15 + 2 * 3 + 1);
  EXPECT_EQ(s.tile_index(6, 4), 6 * 5 + 4);  // the last panel has one group
  // Without panels: the plain k-block-major layout.
  const TiledShape plain = tiled_shape(7 * kTileRows, 5 * kTileCols);
  EXPECT_EQ(plain.panel, 7);
  EXPECT_EQ(plain.tile_index(4, 2), 2 * 7 + 4);
}

TEST(WeightTiles, PackThenReadGivesEveryElementBack) {
  const int64_t rows = 40, cols = 70, panel_rows = 16;  // groups of 16, 16, 8 rows; 3 k-blocks, the last partial
  std::vector<uint16_t> m(static_cast<size_t>(rows * cols));
  std::iota(m.begin(), m.end(), uint16_t{1});
  const TiledShape s = tiled_shape(rows, cols, panel_rows);
  std::vector<uint16_t> out(static_cast<size_t>(s.bytes() / 2), 0xffff);
  pack_tiled(rows, cols, panel_rows, [&](int64_t n) { return m.data() + n * cols; }, out.data());
  const TiledMatrix t{out.data(), s};
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; ++k) ASSERT_EQ(t.at(n, k), m[static_cast<size_t>(n * cols + k)]) << n << ", " << k;
  }
  // Rows past the end and columns past K are zero.
  EXPECT_EQ(out[static_cast<size_t>(tiled_offset(s, rows, 0))], 0);
  EXPECT_EQ(out[static_cast<size_t>(tiled_offset(s, 0, cols))], 0);
}

// (source tile, bytes, destination offset) of each piece the cursor hands out for one stream.
using Piece = std::tuple<int64_t, uint32_t, uint32_t>;
std::vector<std::vector<Piece>> chunks_of(const WeightStream& s) {
  std::vector<std::vector<Piece>> chunks;
  for (StreamCursor c(s); !c.done();) {
    chunks.emplace_back();
    c.next([&](const unsigned char* src, uint32_t bytes, uint32_t at) {
      chunks.back().emplace_back((src - s.base) / kStreamTileBytes, bytes, at);
    });
  }
  return chunks;
}

TEST(WeightStream, AWholePanelStreamsOneCopyPerChunk) {
  // A tile of 2 groups over 3 kChunkTiles / 2 k-blocks: three whole chunks a pass, each one run.
  WeightStream s{.base = reinterpret_cast<const unsigned char*>(uintptr_t{1} << 20), .stride = 2, .g0 = 0, .groups = 2,
                 .kb0 = 0, .kblocks = 3 * kChunkTiles / 2, .passes = 2};
  const auto chunks = chunks_of(s);
  ASSERT_EQ(chunks.size(), 6u);
  for (size_t i = 0; i < chunks.size(); ++i) {
    ASSERT_EQ(chunks[i].size(), 1u) << i;
    EXPECT_EQ(chunks[i][0], Piece(static_cast<int64_t>(i % 3) * kChunkTiles, kChunkBytes, 0u)) << i;
  }
}

TEST(WeightStream, WholeKBlocksFromAnyKBlockStreamOneRunAcrossKBlockEnds) {
  // A 3-group panel from k-block 5 on, 25 k-blocks (75 tiles), two passes: chunks of 32, 32 and
  // 11 tiles, each one run, cut mid-k-block (32 is not a multiple of 3); each pass from tile 15.
  WeightStream s{.base = reinterpret_cast<const unsigned char*>(uintptr_t{1} << 20), .stride = 3, .g0 = 0, .groups = 3,
                 .kb0 = 5, .kblocks = 25, .passes = 2};
  const auto chunks = chunks_of(s);
  ASSERT_EQ(chunks.size(), 6u);
  const int64_t first[] = {15, 15 + kChunkTiles, 15 + 2 * kChunkTiles};
  const uint32_t tiles[] = {kChunkTiles, kChunkTiles, 75 - 2 * kChunkTiles};
  for (size_t i = 0; i < chunks.size(); ++i) {
    ASSERT_EQ(chunks[i].size(), 1u) << i;
    EXPECT_EQ(chunks[i][0], Piece(first[i % 3], tiles[i % 3] * kStreamTileBytes, 0u)) << i;
  }
}

TEST(WeightStream, PartOfAPanelStreamsOnePiecePerKBlock) {
  // Groups 1-2 of a 3-group panel from k-block 4 on (tile (g, kb) at kb * 3 + g), one k-block
  // more than a chunk holds: a first chunk of kChunkTiles / 2 pieces, then one of one.
  constexpr int64_t per_chunk = kChunkTiles / 2;
  WeightStream s{.base = reinterpret_cast<const unsigned char*>(uintptr_t{1} << 20), .stride = 3, .g0 = 1, .groups = 2,
                 .kb0 = 4, .kblocks = per_chunk + 1, .passes = 1};
  const auto chunks = chunks_of(s);
  ASSERT_EQ(chunks.size(), 2u);
  ASSERT_EQ(chunks[0].size(), static_cast<size_t>(per_chunk));
  for (uint32_t i = 0; i < per_chunk; ++i) {
    EXPECT_EQ(chunks[0][i], Piece((4 + i) * 3 + 1, 2 * kStreamTileBytes, i * 2 * kStreamTileBytes)) << i;
  }
  ASSERT_EQ(chunks[1].size(), 1u);
  EXPECT_EQ(chunks[1][0], Piece((4 + per_chunk) * 3 + 1, 2 * kStreamTileBytes, 0u));
}

TEST(WeightStream, RoundsStreamWholePanelsEndToEndAndEachPassReadsThemAll) {
  // Three rounds of whole panels of 3, 3 and 2 groups over 11 k-blocks (33, 33 and 22 tiles),
  // two passes: a chunk ends with its round, and the second pass starts again at the first panel.
  WeightStream s{.base = reinterpret_cast<const unsigned char*>(uintptr_t{1} << 20), .stride = 3, .g0 = 0, .groups = 3,
                 .kb0 = 0, .kblocks = 11, .passes = 2, .rounds = 3, .last_groups = 2};
  const auto chunks = chunks_of(s);
  static_assert(kChunkTiles == 32, "the chunks below are of 32 tiles");
  const std::vector<std::vector<Piece>> pass = {
      {Piece(0, 32 * kStreamTileBytes, 0u)}, {Piece(32, kStreamTileBytes, 0u)},         // round 0: 33 tiles
      {Piece(33, 32 * kStreamTileBytes, 0u)}, {Piece(65, kStreamTileBytes, 0u)},        // round 1
      {Piece(66, 22 * kStreamTileBytes, 0u)}};                                          // round 2: 22 tiles
  std::vector<std::vector<Piece>> want = pass;
  want.insert(want.end(), pass.begin(), pass.end());
  EXPECT_EQ(chunks, want);
  EXPECT_EQ(s.chunks(), 10);
}

}  // namespace
}  // namespace evt::kernels::llm
