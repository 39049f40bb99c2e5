#pragma once
// The MoE router with the post-attention RMSNorm fused in (docs/moe_decode.md): tile (l, n) writes
// the logits of experts [n * rows_e, ...) for every token, router_logits = xn Wrouter^T. A dense
// layer of an MoE model has no router: its tiles do nothing.
//   reads (cfg, wtab, x_mid: T x H f32), writes (router_logits: T x XE f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask moe_router_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), width = writes[0].dim(1);
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t experts = m.sparse() ? m.experts : 0;
  float* out = writes[0].as<float>();
  const GemvInput in{.x = reads[2].as<const float>(), .ld = hidden, .tokens = tokens,
                     .norm_w = weight<uint16_t>(reads[1], l, kWpostNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  const Range rows = tile_range(tile[1], cfg[kCfgMoeRowsE], experts);
  return gemv_task(1, in, m.router, m.router_shape, rows.begin / kTileRows, tile_groups(rows), 0, hidden, experts,
                   GemvOutput{.out = out, .ld = width});
}

template <class Block>
EVT_HD void moe_router_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, moe_router_task(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream moe_router_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                      const DevBuffer* writes) {
  return gemv_stream(b, moe_router_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
