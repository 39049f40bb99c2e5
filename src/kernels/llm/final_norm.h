#pragma once
// The final RMSNorm of the rows whose logits the step returns: tile s normalizes token
// logit_rows[s] of the last layer's output, x[L % 2].
//   reads (cfg, x: 2 x T x H f32, final_w: H bf16, logit_rows: S i32), writes (xf: S x H f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

template <class Block>
EVT_HD void final_norm_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t s = tile[0], tokens = reads[1].dim(1), hidden = reads[1].dim(2);
  const int64_t row = reads[3].as<const int32_t>()[s];
  const float* x = reads[1].as<const float>() + ((cfg[kCfgLayers] % 2) * tokens + row) * hidden;
  const uint16_t* w = reads[2].as<const uint16_t>();
#if defined(__CUDA_ARCH__)
  __shared__ float scale;
#else
  float scale;
#endif
  if (warp(b) == 0) {  // 1 / sqrt(mean(x^2) + eps), one warp over the row
    float sum = 0;
    for (int64_t k = lane(b); k < hidden; k += lanes()) sum += x[k] * x[k];
    sum = warp_sum(sum);
    if (lane(b) == 0) scale = 1.0f / sqrtf(sum / static_cast<float>(hidden) + bits_to_f32(cfg[kCfgEpsBits]));
  }
  b.sync();
  for (int64_t k = b.thread(); k < hidden; k += b.threads()) {
    writes[0].as<float>()[s * hidden + k] = x[k] * scale * bf16_to_f32(w[k]);
  }
  b.sync();  // the next task of this block reuses `scale`
}

}  // namespace evt::kernels::llm
