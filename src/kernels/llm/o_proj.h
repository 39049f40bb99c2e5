#pragma once
// Attention output projection plus the residual: tile (l, n) writes rows [n * rows_h, ...) of
// x_mid = x[l % 2] + attn Wo^T for every token.
//   reads (cfg, wtab, attn: T x HQ D bf16, x: 2 x T x H bf16), writes (x_mid: T x H bf16)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask o_proj_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), width = reads[2].dim(1), hidden = writes[0].dim(1);
  const Range rows = tile_range(tile[1], cfg[kCfgRowsH], hidden);
  return residual_task(reads[2].as<const uint16_t>(), tokens, width, weight<uint16_t>(reads[1], l, kWo), hidden,
                       cfg[kCfgRowsH], rows.begin / kTileRows, tile_groups(rows),
                       reads[3].as<const uint16_t>() + (l % 2) * tokens * hidden, writes[0].as<uint16_t>());
}

template <class Block>
EVT_HD void o_proj_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, o_proj_task(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream o_proj_stream(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  return gemv_stream(b, o_proj_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
