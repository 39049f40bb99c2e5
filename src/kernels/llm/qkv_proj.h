#pragma once
// QKV projection with the input RMSNorm fused in, split over K. Tile (l, n, ks) computes head n
// of the fused output (query heads first, then key heads, then value heads: head_dim rows of the
// stacked QKV matrix) over the ks-th slice of the hidden dim, for every token. The partial sums go
// to p_qkv[ks]; qkv_finish adds them up. A slice past the hidden dim writes zeros.
//   reads (cfg, wtab, x: 2 x T x H bf16), writes (p_qkv: KQ x T x (HQ + 2 HKV) D f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask qkv_proj_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], head = tile[1], ks = tile[2];
  const int64_t tokens = reads[2].dim(1), hidden = reads[2].dim(2);
  const int64_t d = cfg[kCfgHeadDim], width = writes[0].dim(2);
  const GemvInput in{.x = reads[2].as<const uint16_t>() + (l % 2) * tokens * hidden, .bf16 = true, .ld = hidden,
                     .tokens = tokens, .norm_w = weight<uint16_t>(reads[1], l, kWinputNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  const Range k = tile_range(ks, cfg[kCfgQkvSplitLen], hidden);
  float* out = writes[0].as<float>() + ks * tokens * width;
  return gemv_task(1, in, weight<uint16_t>(reads[1], l, kWqkv), tiled_shape(width, hidden, d), head * d / kTileRows,
                   d / kTileRows, k.begin, k.end, width, GemvOutput{.out = out, .ld = width});
}

template <class Block>
EVT_HD void qkv_proj_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, qkv_proj_task(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream qkv_proj_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                    const DevBuffer* writes) {
  return gemv_stream(b, qkv_proj_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
