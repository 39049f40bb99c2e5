#pragma once
// The seeds' split-K row sum (seed 000): C[r] = sum_k A[r, k] for A of shape (B*32, 128), in two
// stages joined by an event tensor E of shape (B,):
//   partial_sum, tiles (B, 4): P[i*32 : i*32+32, j] = sum of A's column block j   -> E[i]
//   final_sum,   tiles (B,):   C[i*32 : i*32+32]    = sum_j P[.., j]              <- E[i]
// Each row is summed in order by one thread, so every backend gets the same bits.

#include "kernels/tile_body.h"

namespace evt::kernels {

constexpr int64_t kSplitKRowsPerTile = 32;

// reads (A: rows x cols), writes (P: rows x splits); column block width = cols / splits.
template <class Block>
EVT_HD void partial_sum_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const DevBuffer &a = reads[0], &p = writes[0];
  const int64_t cols = a.dim(1), splits = p.dim(1), width = cols / splits;
  const int64_t i = tile[0], j = tile[1];
  const int64_t row_end = min_of(a.dim(0), (i + 1) * kSplitKRowsPerTile);
  for (int64_t r = i * kSplitKRowsPerTile + b.thread(); r < row_end; r += b.threads()) {
    const float* row = a.as<const float>() + r * cols + j * width;
    float sum = 0;
    for (int64_t k = 0; k < width; ++k) sum += row[k];
    p.as<float>()[r * splits + j] = sum;
  }
}

// reads (P: rows x splits), writes (C: rows).
template <class Block>
EVT_HD void final_sum_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const DevBuffer &p = reads[0], &c = writes[0];
  const int64_t splits = p.dim(1), i = tile[0];
  const int64_t row_end = min_of(p.dim(0), (i + 1) * kSplitKRowsPerTile);
  for (int64_t r = i * kSplitKRowsPerTile + b.thread(); r < row_end; r += b.threads()) {
    float sum = 0;
    for (int64_t j = 0; j < splits; ++j) sum += p.as<const float>()[r * splits + j];
    c.as<float>()[r] = sum;
  }
}

}  // namespace evt::kernels
