#pragma once
// The layout every projection weight is stored in, on every backend: 16-row x 32-column tiles of
// 1 KiB, each in the order the tensor cores take it, laid out k-block-major across the matrix.
//
// Why: decode reads each weight once, so the layout is chosen for the reads.
//  - A tile is the A operand of two mma.m16n8k16 (rows 0-15, 16 columns each), stored so that
//    lane l's 16 bytes of half h are exactly its four A registers for MMA h. A warp reads a half
//    with one conflict-free 16-byte shared-memory load per lane, and the loader moves whole tiles
//    with bulk copies.
//  - The MMA sums over k in any order, so within a 32-column block the columns are permuted:
//    MMA h takes columns 8c+4h .. 8c+4h+3 of lane (g, c) (g = lane / 4, c = lane % 4) as its k
//    slots 2c, 2c+1, 2c+8, 2c+9. Then the B operand of both MMAs for one token is the 16 bytes of
//    columns 8c .. 8c+7 of the activations: one load.
//  - Row panels, each k-block-major: the 16-row groups are cut into panels of P groups (the last
//    may have fewer), stored one after another, and within a panel of W groups tile (g, kb) sits
//    at kb * W + (g - first group). A projection's tile owns one panel's groups over a range of
//    k-blocks (P is its tile size, decode_plan.cc), so its weights are one run of memory, which
//    the loader moves in whole chunks (32 KiB): one bulk copy per 2 KiB k-block streamed at 2.3
//    TB/s, 16 KiB copies at 4.0 (bench/micro/stream_micro.cu). Within the run, each k-block's
//    tiles lie side by side, so the warps that share the work can each own whole groups, keeping
//    their sums in registers (gemv.h). A panel of every group is the plain k-block-major layout.
// Rows past the matrix's end and columns past K are zero, so every tile is whole.

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace evt::kernels::llm {

inline constexpr int kTileRows = 16;
inline constexpr int kTileCols = 32;
inline constexpr int64_t kTileBytes = kTileRows * kTileCols * 2;

// The tile grid of a rows x cols matrix and its row panels.
struct TiledShape {
  int64_t groups = 0;   // 16-row groups
  int64_t kblocks = 0;  // 32-column blocks
  int64_t panel = 1;    // groups per row panel
  EVT_HD constexpr int64_t tiles() const { return groups * kblocks; }
  EVT_HD constexpr int64_t bytes() const { return tiles() * kTileBytes; }
  // The first group of g's panel, and how many groups that panel has.
  EVT_HD constexpr int64_t panel_first(int64_t g) const { return g / panel * panel; }
  EVT_HD constexpr int64_t panel_width(int64_t g) const {
    const int64_t left = groups - panel_first(g);
    return left < panel ? left : panel;
  }
  // Tile (g, kb) from the matrix's start, in tiles.
  EVT_HD constexpr int64_t tile_index(int64_t g, int64_t kb) const {
    const int64_t first = panel_first(g);
    return first * kblocks + kb * panel_width(g) + (g - first);
  }
};
// `panel_rows` (a multiple of 16) rows per panel; 0 for one panel of every row.
EVT_HD constexpr TiledShape tiled_shape(int64_t rows, int64_t cols, int64_t panel_rows = 0) {
  const int64_t groups = (rows + kTileRows - 1) / kTileRows;
  const int64_t panel = panel_rows > 0 && panel_rows / kTileRows < groups ? panel_rows / kTileRows : groups;
  return TiledShape{groups, (cols + kTileCols - 1) / kTileCols, panel > 0 ? panel : 1};
}

// Where element (r, j) of a tile (row r < 16, column j < 32) sits, in bf16 elements from the
// tile's start: half h, lane (r % 8, c), register (column pair, row half), element in the pair.
EVT_HD constexpr int64_t tile_element(int r, int j) {
  const int c = j / 8, h = (j % 8) / 4, p = j % 4;
  const int lane = (r % 8) * 4 + c, reg = (p / 2) * 2 + r / 8;
  return h * 256 + lane * 8 + reg * 2 + p % 2;
}

// Element (n, k) of a tiled matrix, in bf16 elements from its start.
EVT_HD constexpr int64_t tiled_offset(const TiledShape& s, int64_t n, int64_t k) {
  return s.tile_index(n / kTileRows, k / kTileCols) * (kTileBytes / 2) +
         tile_element(static_cast<int>(n % kTileRows), static_cast<int>(k % kTileCols));
}

// A tiled matrix as the CPU references read it: element (n, k), with no notion of tiles.
struct TiledMatrix {
  const uint16_t* base = nullptr;
  TiledShape shape;
  uint16_t at(int64_t n, int64_t k) const { return base[tiled_offset(shape, n, k)]; }
};

// Writes a rows x cols matrix into `out` (tiled_shape(rows, cols).bytes() bytes) in the tiled
// layout with panels of `panel_rows` rows (0: one panel). row(n) is the start of source row n
// (cols bf16 values), or null for a zero row.
template <class RowFn>
void pack_tiled(int64_t rows, int64_t cols, int64_t panel_rows, RowFn&& row, uint16_t* out) {
  const TiledShape s = tiled_shape(rows, cols, panel_rows);
  std::memset(out, 0, static_cast<size_t>(s.bytes()));
  for (int64_t n = 0; n < rows; ++n) {
    const uint16_t* src = row(n);
    if (src == nullptr) continue;
    for (int64_t k = 0; k < cols; ++k) out[tiled_offset(s, n, k)] = src[k];
  }
}

// Gate and up share 16-row groups in one fused matrix: rows 0-7 of group j are gate rows
// 8j..8j+7, rows 8-15 the up rows 8j..8j+7, so one MMA's accumulator holds the gate and up value of
// the same output in one lane (silu(gate) * up needs no exchange). The fused row of gate (or up)
// row r:
EVT_HD constexpr int64_t gate_up_fused_row(int64_t r, bool up) { return r / 8 * kTileRows + r % 8 + (up ? 8 : 0); }
// ... and the gate (or, where `up` comes back true, up) row of fused row n.
EVT_HD constexpr int64_t gate_up_source_row(int64_t n, bool& up) {
  up = n % kTileRows >= 8;
  return n / kTileRows * 8 + n % 8;
}

}  // namespace evt::kernels::llm
