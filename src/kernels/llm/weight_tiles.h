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
//  - k-block-major (tile (g, kb) at index kb * groups + g): a task that owns groups [g0, g0 + G)
//    over all of K finds each k-block's G tiles side by side, and the warps that share its work
//    can each own whole groups, keeping their sums in registers (gemv.h).
// Rows past the matrix's end and columns past K are zero, so every tile is whole.

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace evt::kernels::llm {

inline constexpr int kTileRows = 16;
inline constexpr int kTileCols = 32;
inline constexpr int64_t kTileBytes = kTileRows * kTileCols * 2;

// The tile grid of a rows x cols matrix.
struct TiledShape {
  int64_t groups = 0;   // 16-row groups: tiles between two k-blocks of one group
  int64_t kblocks = 0;  // 32-column blocks
  EVT_HD int64_t tiles() const { return groups * kblocks; }
  EVT_HD int64_t bytes() const { return tiles() * kTileBytes; }
};
EVT_HD constexpr TiledShape tiled_shape(int64_t rows, int64_t cols) {
  return TiledShape{(rows + kTileRows - 1) / kTileRows, (cols + kTileCols - 1) / kTileCols};
}

// Where element (r, j) of a tile (row r < 16, column j < 32) sits, in bf16 elements from the
// tile's start: half h, lane (r % 8, c), register (column pair, row half), element in the pair.
EVT_HD constexpr int64_t tile_element(int r, int j) {
  const int c = j / 8, h = (j % 8) / 4, p = j % 4;
  const int lane = (r % 8) * 4 + c, reg = (p / 2) * 2 + r / 8;
  return h * 256 + lane * 8 + reg * 2 + p % 2;
}

// Element (n, k) of a tiled matrix of `groups` row groups, in bf16 elements from its start.
EVT_HD constexpr int64_t tiled_offset(int64_t groups, int64_t n, int64_t k) {
  const int64_t tile = (k / kTileCols) * groups + n / kTileRows;
  return tile * (kTileBytes / 2) + tile_element(static_cast<int>(n % kTileRows), static_cast<int>(k % kTileCols));
}

// A tiled matrix as the CPU references read it: element (n, k), with no notion of tiles.
struct TiledMatrix {
  const uint16_t* base = nullptr;
  int64_t groups = 0;
  uint16_t at(int64_t n, int64_t k) const { return base[tiled_offset(groups, n, k)]; }
};

// Writes a rows x cols matrix into `out` (tiled_shape(rows, cols).bytes() bytes) in the tiled
// layout. row(n) is the start of source row n (cols bf16 values), or null for a zero row.
template <class RowFn>
void pack_tiled(int64_t rows, int64_t cols, RowFn&& row, uint16_t* out) {
  const TiledShape s = tiled_shape(rows, cols);
  std::memset(out, 0, static_cast<size_t>(s.bytes()));
  for (int64_t n = 0; n < rows; ++n) {
    const uint16_t* src = row(n);
    if (src == nullptr) continue;
    for (int64_t k = 0; k < cols; ++k) out[tiled_offset(s.groups, n, k)] = src[k];
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
