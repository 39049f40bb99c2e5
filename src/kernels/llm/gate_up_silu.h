#pragma once
// The MLP's first half with the post-attention RMSNorm fused in: tile (l, n) writes columns
// [n * rows_i, ...) of act = silu(xn Wgate^T) * (xn Wup^T), xn = RMSNorm(x_mid). Gate and up rows
// share the fused matrix's 16-row groups (weight_tiles.h), so each output's two dots come out of
// one accumulator.
// act is stored in bf16, as down_proj stages it.
//   reads (cfg, wtab, x_mid: T x H bf16), writes (act: T x I bf16)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask gate_up_silu_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), inter = writes[0].dim(1);
  const GemvInput in{.x = reads[2].as<const uint16_t>(), .bf16 = true, .ld = hidden, .tokens = tokens,
                     .norm_w = weight<uint16_t>(reads[1], l, kWpostNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  const Range rows = tile_range(tile[1], cfg[kCfgRowsI], inter);  // 8 outputs per fused group
  return gemv_task(2, in, weight<uint16_t>(reads[1], l, kWgateUp), tiled_shape(2 * inter, hidden, 2 * cfg[kCfgRowsI]),
                   rows.begin / 8, (rows.end - rows.begin + 7) / 8, 0, hidden, inter,
                   GemvOutput{.out = writes[0].as<uint16_t>(), .bf16 = true, .ld = inter});
}

template <class Block>
EVT_HD void gate_up_silu_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, gate_up_silu_task(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream gate_up_silu_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                        const DevBuffer* writes) {
  return gemv_stream(b, gate_up_silu_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
