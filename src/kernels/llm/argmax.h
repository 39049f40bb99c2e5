#pragma once
// Greedy sampling: tile s writes the index of row s's largest logit; ties go to the lowest
// index and a NaN counts as the largest value, as torch.argmax does.
//   reads (logits: S x V f32), writes (next: S i32)

#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// (value, index) with the larger value winning, NaN above everything, the lower index on a tie.
EVT_HD inline bool better(float v, int64_t i, float best_v, int64_t best_i) {
  const bool v_nan = v != v, best_nan = best_v != best_v;
  if (v_nan || best_nan) return v_nan && (!best_nan || i < best_i);
  return v > best_v || (v == best_v && i < best_i);
}

template <class Block>
EVT_HD void argmax_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t s = tile[0], vocab = reads[0].dim(1);
  const float* row = reads[0].as<const float>() + s * vocab;
  float best = -INFINITY;
  int64_t best_i = vocab;
  for (int64_t i = b.thread(); i < vocab; i += b.threads()) {
    if (better(row[i], i, best, best_i)) {
      best = row[i];
      best_i = i;
    }
  }
#if defined(__CUDA_ARCH__)
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best, offset);
    const int64_t i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (better(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
  __shared__ float s_best[32];
  __shared__ int64_t s_index[32];
  if (lane(b) == 0) {
    s_best[warp(b)] = best;
    s_index[warp(b)] = best_i;
  }
  b.sync();
  if (b.thread() == 0) {
    for (int w = 1; w < warps(b); ++w) {
      if (better(s_best[w], s_index[w], best, best_i)) {
        best = s_best[w];
        best_i = s_index[w];
      }
    }
  }
  b.sync();  // the next task of this block reuses the shared slots
#endif
  if (b.thread() == 0) writes[0].as<int32_t>()[s] = static_cast<int32_t>(best_i < vocab ? best_i : 0);
}

}  // namespace evt::kernels::llm
