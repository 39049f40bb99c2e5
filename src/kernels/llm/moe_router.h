#pragma once
// The MoE router with the post-attention RMSNorm fused in (docs/moe_decode.md): tile (l, i) writes
// the logits of experts [n * rows_e, ...) for tokens [k * kPassTokens, ...), router_logits = xn
// Wrouter^T, where n = i % P and k = i / P for the P = ceil(XE / rows_e) tiles of experts (the
// graph's NR is P times the passes). A step of more tokens than a GEMV pass takes spreads its
// passes over tiles: on P workers one after another, the passes took 23 of a 443 us Qwen3-30B-A3B
// layer at B = 32 (two passes, each normalizing its 16 rows first). A dense layer of an MoE model
// has no router: its tiles do nothing.
//   reads (cfg, wtab, x_mid: T x H bf16), writes (router_logits: T x XE f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

// Router tile i's tile of experts and first token in a step of `tokens`. A step of one pass takes
// its tile index as is: the router is on a B = 1 layer's critical path, and with the loops below
// run at every B the Qwen3-30B-A3B step was 0.5% slower at B = 1, against 0.2% this way (H200).
struct RouterTile {
  int64_t experts_tile, first_token;
};
// The router's tiles of experts, ceil(experts / rows_e): the host binds the grid from it too. By
// subtraction rather than division, as the passes below: a layer has few tiles of experts (8 for
// 128 experts), and a division is a few dozen instructions in each copy of the task.
EVT_HD inline int32_t router_tiles_per_pass(int32_t experts, int32_t rows_e) {
  int32_t tiles = 0;
  for (int32_t first = 0; first < experts; first += max_of(rows_e, 1)) ++tiles;
  return tiles;
}
EVT_HD inline RouterTile router_tile(const int32_t* cfg, int64_t tokens, int64_t i) {
  if (tokens <= kPassTokens) return RouterTile{i, 0};
  const int32_t per_pass = router_tiles_per_pass(cfg[kCfgMoeExperts], cfg[kCfgMoeRowsE]);
  int32_t n = static_cast<int32_t>(i), pass = 0;
  for (; per_pass > 0 && n >= per_pass; n -= per_pass) ++pass;
  return RouterTile{n, int64_t{pass} * kPassTokens};
}

EVT_HD inline GemvTask moe_router_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), width = writes[0].dim(1);
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t experts = m.sparse() ? m.experts : 0;
  const RouterTile rt = router_tile(cfg, tokens, tile[1]);
  float* out = writes[0].as<float>() + rt.first_token * width;
  const GemvInput in{.x = reads[2].as<const uint16_t>() + rt.first_token * hidden, .bf16 = true, .ld = hidden,
                     .tokens = max_of<int64_t>(0, min_of<int64_t>(kPassTokens, tokens - rt.first_token)),
                     .norm_w = weight<uint16_t>(reads[1], l, kWpostNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  const Range rows = tile_range(rt.experts_tile, cfg[kCfgMoeRowsE], experts);
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
