#pragma once
// The MLP's down projection plus the residual: tile (l, n) writes rows [n * rows_h, ...) of the
// next layer's residual stream, x[(l + 1) % 2] = x_mid + act Wdown^T.
//   reads (cfg, wtab, act: T x I bf16, x_mid: T x H bf16), writes (x: 2 x T x H bf16)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask down_proj_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), inter = reads[2].dim(1), hidden = reads[3].dim(1);
  const Range rows = tile_range(tile[1], cfg[kCfgRowsH], hidden);
  return residual_task(reads[2].as<const uint16_t>(), tokens, inter, weight<uint16_t>(reads[1], l, kWdown), hidden,
                       cfg[kCfgRowsH], rows.begin / kTileRows, tile_groups(rows), reads[3].as<const uint16_t>(),
                       writes[0].as<uint16_t>() + ((l + 1) % 2) * tokens * hidden);
}

template <class Block>
EVT_HD void down_proj_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, down_proj_task(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream down_proj_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                     const DevBuffer* writes) {
  return gemv_stream(b, down_proj_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
