#pragma once
// The matrix-vector core of every projection tile: rows [n0, n1) of a bf16 weight matrix times
// the f32 activations of every token of the step, over the columns [k0, k1), with the input's
// RMSNorm optionally fused in. A warp owns a row (or kRows rows read together, as gate and up),
// its lanes stride the columns with 16-byte weight loads, kUnroll of them per row in flight
// before the first is used (decode is bound by loads in flight, not by arithmetic), and
// kTokenGroup tokens share each weight load; the warp's sum goes to the caller's epilogue. Any
// token count works: tokens are taken in chunks whose norm scales sit in shared memory.

#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

inline constexpr int kScaleChunk = 64;  // tokens whose RMSNorm scales one pass keeps
inline constexpr int kTokenGroup = 4;   // tokens that share one load of the weights
inline constexpr int kUnroll = 4;       // 16-byte weight loads per row a lane issues before using one

struct GemvInput {
  const float* x = nullptr;  // token t's row starts at x + t * ld
  int64_t ld = 0;
  int64_t tokens = 0;
  // Fused RMSNorm: null for none. Otherwise each row is scaled by 1 / sqrt(mean(row^2) + eps)
  // over its first norm_len values and each column k by norm_w[k].
  const uint16_t* norm_w = nullptr;
  int64_t norm_len = 0;
  float eps = 0;
};

// scale[i] = 1 / sqrt(mean(x_row^2) + eps) for the rows i < count (row i at x + i * ld, n long).
template <class Block>
EVT_HD void rms_scales(const Block& b, const float* x, int64_t ld, int64_t n, int64_t count, float eps, float* scale) {
  for (int64_t i = warp(b); i < count; i += warps(b)) {
    float sum = 0;
    for (int64_t k = lane(b); k < n; k += lanes()) sum += x[i * ld + k] * x[i * ld + k];
    sum = warp_sum(sum);
    if (lane(b) == 0) scale[i] = 1.0f / sqrtf(sum / static_cast<float>(n) + eps);
  }
}

// `rows(n, w)` sets w[r] to the start of weight row r of output n (r < kRows); `epi(t, n, v)`
// receives the kRows dot products of token t. k0 and k1 - k0 must be multiples of 8, and the
// GPU needs 16-byte aligned weight rows and activation rows (x and ld multiples of 4 floats).
template <int kRows, class Block, class RowPtrs, class Epilogue>
EVT_HD void gemv_tile(const Block& b, const GemvInput& in, int64_t n0, int64_t n1, int64_t k0, int64_t k1,
                      RowPtrs&& rows, Epilogue&& epi) {
#if defined(__CUDA_ARCH__)
  __shared__ float scale[kScaleChunk];
#else
  float scale[kScaleChunk];
#endif
  for (int64_t c0 = 0; c0 < in.tokens; c0 += kScaleChunk) {
    const int64_t count = min_of<int64_t>(kScaleChunk, in.tokens - c0);
    const float* x = in.x + c0 * in.ld;
    if (in.norm_w != nullptr) {
      rms_scales(b, x, in.ld, in.norm_len, count, in.eps, scale);
    } else {
      for (int64_t i = b.thread(); i < count; i += b.threads()) scale[i] = 1.0f;
    }
    b.sync();
    for (int64_t n = n0 + warp(b); n < n1; n += warps(b)) {
      const uint16_t* w[kRows];
      rows(n, w);
      for (int64_t t0 = 0; t0 < count; t0 += kTokenGroup) {
        const int group = static_cast<int>(min_of<int64_t>(kTokenGroup, count - t0));
        float acc[kRows][kTokenGroup] = {};
        constexpr int64_t kStep = 8 * lanes();  // columns the warp covers per load
        for (int64_t k = k0 + 8 * lane(b); k < k1; k += kStep * kUnroll) {
          Bf16x8 raw[kUnroll][kRows];
          for (int u = 0; u < kUnroll; ++u) {
            for (int r = 0; r < kRows; ++r) {
              if (k + u * kStep < k1) raw[u][r] = load_bf16x8(w[r] + k + u * kStep);
            }
          }
          for (int u = 0; u < kUnroll; ++u) {
            const int64_t ku = k + u * kStep;
            if (ku >= k1) break;
            float wv[kRows][8];
            for (int r = 0; r < kRows; ++r) unpack_bf16x8(raw[u][r], wv[r]);
            if (in.norm_w != nullptr) {
              float g[8];
              load8_bf16(in.norm_w + ku, g);
              for (int r = 0; r < kRows; ++r) {
                for (int i = 0; i < 8; ++i) wv[r][i] *= g[i];
              }
            }
            for (int tt = 0; tt < kTokenGroup; ++tt) {
              if (tt >= group) break;
              float xv[8];
              load8_f32(x + (t0 + tt) * in.ld + ku, xv);
              for (int r = 0; r < kRows; ++r) {
                for (int i = 0; i < 8; ++i) acc[r][tt] += wv[r][i] * xv[i];
              }
            }
          }
        }
        for (int tt = 0; tt < kTokenGroup; ++tt) {
          for (int r = 0; r < kRows; ++r) acc[r][tt] = warp_sum(acc[r][tt]);
        }
        if (lane(b) == 0) {
          for (int tt = 0; tt < group; ++tt) {
            float v[kRows];
            for (int r = 0; r < kRows; ++r) v[r] = acc[r][tt] * scale[t0 + tt];
            epi(c0 + t0 + tt, n, v);
          }
        }
      }
    }
    b.sync();  // the next chunk overwrites the scales
  }
}

// out = residual + x W^T over the rows [n0, n1): the projections that end the attention and MLP
// blocks. x is tokens x k (row stride k), W is rows x k, residual and out are tokens x width.
template <class Block>
EVT_HD void gemv_residual(const Block& b, const float* x, int64_t tokens, int64_t k, const uint16_t* w, int64_t n0,
                          int64_t n1, const float* residual, float* out, int64_t width) {
  GemvInput in;
  in.x = x;
  in.ld = k;
  in.tokens = tokens;
  gemv_tile<1>(
      b, in, n0, n1, 0, k, [&](int64_t r, const uint16_t** p) { p[0] = w + r * k; },
      [&](int64_t t, int64_t r, const float* v) { out[t * width + r] = residual[t * width + r] + v[0]; });
}

}  // namespace evt::kernels::llm
