// The seeds' split-K row sum (seed 000): C[r] = sum_k A[r, k] for A of shape (B*32, 128), in two
// stages joined by an event tensor E of shape (B,):
//   partial_sum, tiles (B, 4): P[i*32 : i*32+32, j] = sum of A's column block j   -> E[i]
//   final_sum,   tiles (B,):   C[i*32 : i*32+32]    = sum_j P[.., j]              <- E[i]

#include <algorithm>

#include "kernels/registry.h"

namespace evt::kernels {
namespace {

constexpr int64_t kRowsPerTile = 32;

// reads (A: rows x cols), writes (P: rows x splits); column block width = cols / splits.
void partial_sum(const TileArgs& args) {
  const BufferView& a = args.reads[0];
  const BufferView& p = args.writes[0];
  const int64_t cols = a.dim(1), splits = p.dim(1), width = cols / splits;
  const int64_t i = args.tile[0], j = args.tile[1];
  const int64_t row_end = std::min(a.dim(0), (i + 1) * kRowsPerTile);
  for (int64_t r = i * kRowsPerTile; r < row_end; ++r) {
    const float* row = a.as<const float>() + r * cols + j * width;
    float sum = 0;
    for (int64_t k = 0; k < width; ++k) sum += row[k];
    p.as<float>()[r * splits + j] = sum;
  }
}

// reads (P: rows x splits), writes (C: rows).
void final_sum(const TileArgs& args) {
  const BufferView& p = args.reads[0];
  const BufferView& c = args.writes[0];
  const int64_t splits = p.dim(1), i = args.tile[0];
  const int64_t row_end = std::min(p.dim(0), (i + 1) * kRowsPerTile);
  for (int64_t r = i * kRowsPerTile; r < row_end; ++r) {
    float sum = 0;
    for (int64_t j = 0; j < splits; ++j) sum += p.as<const float>()[r * splits + j];
    c.as<float>()[r] = sum;
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(partial_sum, TileFunction{
    .name = "partial_sum",
    .summary = "split-K partial row sums of a 32-row block over one column block",
    .num_reads = 1, .num_writes = 1, .cpu = partial_sum, .relative_cost = 1});
EVT_REGISTER_TILE_FUNCTION(final_sum, TileFunction{
    .name = "final_sum",
    .summary = "sum of the split-K partials of a 32-row block",
    .num_reads = 1, .num_writes = 1, .cpu = final_sum, .relative_cost = 0.25});

}  // namespace evt::kernels
