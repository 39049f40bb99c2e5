#pragma once
// Host helpers of the naive CPU references: plain loops in double, written without the bodies'
// warp structure so that a reference and a body share no code that could hide a bug.

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"
#include "kernels/llm/weight_tiles.h"
#include "kernels/tile_args.h"

namespace evt::kernels::llm {

inline float cfg_eps(const BufferView& cfg) { return bits_to_f32(cfg.as<const int32_t>()[kCfgEpsBits]); }
inline int64_t cfg_at(const BufferView& cfg, Cfg word) { return cfg.as<const int32_t>()[word]; }

template <typename T>
const T* ref_weight(const BufferView& wtab, int64_t layer, WeightColumn column) {
  const int64_t address = wtab.as<const int64_t>()[layer * kWeightColumns + column];
  return reinterpret_cast<const T*>(static_cast<uintptr_t>(address));
}

// RMSNorm's scale of a row: 1 / sqrt(mean(x^2) + eps).
inline double ref_rms_scale(const float* x, int64_t n, double eps) {
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += static_cast<double>(x[k]) * x[k];
  return 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
}

// x * rsqrt(mean(x^2) + eps) * w, as Hugging Face's RMSNorm computes it (w null: no weight).
inline std::vector<double> ref_rmsnorm(const float* x, int64_t n, const uint16_t* w, double eps) {
  const double scale = ref_rms_scale(x, n, eps);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out[k] = x[k] * scale * (w != nullptr ? bf16_to_f32(w[k]) : 1.0);
  return out;
}

// A projection's input under a fused RMSNorm, as the GEMV applies the norm (gemv.h, stage_pass):
// the dots take x * w (which ref_dot rounds to bf16), and the row's scale 1 / sqrt(mean(x^2) +
// eps) multiplies each dot. Hugging Face rounds x * scale * w instead: one rounding either way.
struct RefNormedInput {
  std::vector<double> xw;
  double scale = 1;
  // Row `row` of the tiled matrix w dotted with the normed input over columns [k0, k1).
  double dot(const TiledMatrix& w, int64_t row, int64_t k0, int64_t k1) const;
};
inline RefNormedInput ref_normed_input(const float* x, int64_t n, const uint16_t* w, double eps) {
  RefNormedInput in;
  for (int64_t k = 0; k < n; ++k) in.xw.push_back(x[k] * static_cast<double>(bf16_to_f32(w[k])));
  in.scale = ref_rms_scale(x, n, eps);
  return in;
}

// A projection's input value: rounded to bf16, as Hugging Face's bf16 linears take it (and as
// the bodies stage it for the tensor cores).
inline double ref_projection_input(double x) { return bf16_to_f32(f32_to_bf16(static_cast<float>(x))); }
// ... or as its producer stored it, already in bf16.
inline double ref_projection_input(uint16_t x) { return bf16_to_f32(x); }

// A tiled rows x cols projection matrix in row panels of panel_rows rows (0: one panel;
// weight_tiles.h).
inline TiledMatrix ref_tiled(const uint16_t* base, int64_t rows, int64_t cols, int64_t panel_rows = 0) {
  return TiledMatrix{base, tiled_shape(rows, cols, panel_rows)};
}
inline TiledMatrix ref_tiled(const BufferView& wtab, int64_t layer, WeightColumn column, int64_t rows, int64_t cols,
                             int64_t panel_rows) {
  return ref_tiled(ref_weight<uint16_t>(wtab, layer, column), rows, cols, panel_rows);
}

// Row `row` of the tiled bf16 matrix w dotted with x (columns [k0, k1)), a projection's input.
template <typename X>
double ref_dot(const TiledMatrix& w, int64_t row, int64_t k0, int64_t k1, const X* x) {
  double sum = 0;
  for (int64_t k = k0; k < k1; ++k) sum += static_cast<double>(bf16_to_f32(w.at(row, k))) * ref_projection_input(x[k]);
  return sum;
}

inline double RefNormedInput::dot(const TiledMatrix& w, int64_t row, int64_t k0, int64_t k1) const {
  return scale * ref_dot(w, row, k0, k1, xw.data());
}

// out[t][r] = residual[t][r] + W[r] . x[t] over rows [tile * per_tile, ...) of `rows`, for every
// token: the projections that end a block with the residual add. W is tiled in panels of the
// tile size; x is tokens x k, in bf16 as its producer stored it; residual and out are tokens x rows.
inline void ref_residual_projection(const uint16_t* tiled_w, const uint16_t* x, int64_t tokens, int64_t k, int64_t rows,
                                    int64_t tile, int64_t per_tile, const float* residual, float* out) {
  const TiledMatrix w = ref_tiled(tiled_w, rows, k, per_tile);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = tile * per_tile; r < (tile + 1) * per_tile && r < rows; ++r) {
      out[t * rows + r] = static_cast<float>(residual[t * rows + r] + ref_dot(w, r, 0, k, x + t * k));
    }
  }
}

}  // namespace evt::kernels::llm
