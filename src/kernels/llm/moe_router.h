#pragma once
// The MoE router with the post-attention RMSNorm fused in (docs/moe_decode.md): tile (l, n) writes
// the logits of experts [n * rows_e, ...) for every token, router_logits = xn Wrouter^T. A dense
// layer of an MoE model has no router: its tiles do nothing.
//   reads (cfg, wtab, x_mid: T x H f32), writes (router_logits: T x XE f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

EVT_HD inline auto moe_router_job(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), width = writes[0].dim(1);
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t experts = m.sparse() ? m.experts : 0;
  float* out = writes[0].as<float>();
  const GemvInput in{.x = reads[2].as<const float>(), .ld = hidden, .tokens = tokens,
                     .norm_w = weight<uint16_t>(reads[1], l, kWpostNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  const Range rows = tile_range(tile[1], cfg[kCfgMoeRowsE], experts);
  return gemv_job<1>(in, m.router, m.router_shape, rows.begin / kTileRows, tile_groups(rows), 0, hidden, experts,
                     [=](int64_t t, int64_t e, const float* v) { out[t * width + e] = v[0]; });
}

template <class Block>
EVT_HD void moe_router_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const auto job = moe_router_job(tile, reads, writes);
  if (job.groups > 0) gemv_run(b, job);
}

template <class Block>
EVT_HD WeightStream moe_router_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                      const DevBuffer* writes) {
  const auto job = moe_router_job(tile, reads, writes);
  return job.groups > 0 ? gemv_stream(b, job) : WeightStream{};
}

}  // namespace evt::kernels::llm
