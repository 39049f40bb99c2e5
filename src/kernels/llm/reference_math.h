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
// x is a row of the residual stream, bf16 as Hugging Face keeps it in a bf16 model.
struct RefNormedInput {
  std::vector<double> xw;
  double scale = 1;
  // Row `row` of the tiled matrix w dotted with the normed input over columns [k0, k1).
  double dot(const TiledMatrix& w, int64_t row, int64_t k0, int64_t k1) const;
};
inline RefNormedInput ref_normed_input(const uint16_t* x, int64_t n, const uint16_t* w, double eps) {
  RefNormedInput in;
  std::vector<float> row;
  for (int64_t k = 0; k < n; ++k) {
    row.push_back(bf16_to_f32(x[k]));
    in.xw.push_back(row.back() * static_cast<double>(bf16_to_f32(w[k])));
  }
  in.scale = ref_rms_scale(row.data(), n, eps);
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
// tile size; x is tokens x k, in bf16 as its producer stored it; residual and out are tokens x rows
// of the residual stream, in bf16.
inline void ref_residual_projection(const uint16_t* tiled_w, const uint16_t* x, int64_t tokens, int64_t k, int64_t rows,
                                    int64_t tile, int64_t per_tile, const uint16_t* residual, uint16_t* out) {
  const TiledMatrix w = ref_tiled(tiled_w, rows, k, per_tile);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = tile * per_tile; r < (tile + 1) * per_tile && r < rows; ++r) {
      const double sum = bf16_to_f32(residual[t * rows + r]) + ref_dot(w, r, 0, k, x + t * k);
      out[t * rows + r] = f32_to_bf16(static_cast<float>(sum));
    }
  }
}

// Head `head` (q heads, then k, then v: p_qkv's column blocks) of token t at `position`, finished
// as kernels/llm/qkv_head.h specifies: the K splits of p_qkv (KQ x T x width) added, the q/k
// RMSNorm when cfg asks for it, RoPE on q and k heads. Written independently of the bodies.
inline std::vector<float> ref_qkv_head(const BufferView& cfg, const BufferView& wtab, const BufferView& p,
                                       const BufferView& inv_freq, int64_t layer, int64_t t, int64_t head,
                                       int64_t position) {
  const int64_t splits = p.dim(0), tokens = p.dim(1), width = p.dim(2), d = cfg_at(cfg, kCfgHeadDim);
  const int64_t heads = cfg_at(cfg, kCfgHeads), kv_heads = cfg_at(cfg, kCfgKvHeads);
  const bool is_q = head < heads, is_k = !is_q && head < heads + kv_heads;
  std::vector<float> v(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) {
    double sum = 0;
    for (int64_t ks = 0; ks < splits; ++ks) sum += p.as<const float>()[(ks * tokens + t) * width + head * d + i];
    v[i] = static_cast<float>(sum);
  }
  if (!is_q && !is_k) return v;
  if (cfg_at(cfg, kCfgQkNorm) != 0) {
    const std::vector<double> n =
        ref_rmsnorm(v.data(), d, ref_weight<uint16_t>(wtab, layer, is_q ? kWqNorm : kWkNorm), cfg_eps(cfg));
    for (int64_t i = 0; i < d; ++i) v[i] = static_cast<float>(n[i]);
  }
  std::vector<float> r(v);
  for (int64_t i = 0; i < d / 2; ++i) {
    const double angle = static_cast<float>(position) * inv_freq.as<const float>()[i];
    r[i] = static_cast<float>(v[i] * std::cos(angle) - v[i + d / 2] * std::sin(angle));
    r[i + d / 2] = static_cast<float>(v[i + d / 2] * std::cos(angle) + v[i] * std::sin(angle));
  }
  return r;
}

// The first element of (layer, slot, KV head)'s row in a cache of L x SLOTS x HKV x D.
inline int64_t ref_kv_row(const BufferView& cache, int64_t layer, int64_t slot, int64_t kv_head) {
  return ((layer * cache.dim(1) + slot) * cache.dim(2) + kv_head) * cache.dim(3);
}

// The cache slot of `position` in sequence `sequence` (block_table: S x MAXB page ids).
inline int64_t ref_kv_slot(const BufferView& cfg, const BufferView& table, int64_t sequence, int64_t position) {
  const int64_t page_size = cfg_at(cfg, kCfgPageSize);
  return int64_t{table.as<const int32_t>()[sequence * table.dim(1) + position / page_size]} * page_size +
         position % page_size;
}

}  // namespace evt::kernels::llm
