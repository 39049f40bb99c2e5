#pragma once
// The MLP's first half with the post-attention RMSNorm fused in: tile (l, n) writes columns
// [n * rows_i, ...) of act = silu(xn Wgate^T) * (xn Wup^T), xn = RMSNorm(x_mid). A warp reads the
// gate and up rows of one column together.
//   reads (cfg, wtab, x_mid: T x H f32), writes (act: T x I f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"

namespace evt::kernels::llm {

EVT_HD inline auto gate_up_silu_job(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), inter = writes[0].dim(1);
  const uint16_t* gate = weight<uint16_t>(reads[1], l, kWgate);
  const uint16_t* up = weight<uint16_t>(reads[1], l, kWup);
  float* out = writes[0].as<float>();
  const GemvInput in{.x = reads[2].as<const float>(), .ld = hidden, .tokens = tokens,
                     .norm_w = weight<uint16_t>(reads[1], l, kWpostNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  const Range rows = tile_range(tile[1], cfg[kCfgRowsI], inter);
  return gemv_job<2>(
      in, rows.begin, rows.end, 0, hidden,
      [=](int64_t r, const uint16_t** p) {
        p[0] = gate + r * hidden;
        p[1] = up + r * hidden;
      },
      [=](int64_t t, int64_t r, const float* v) { out[t * inter + r] = silu(v[0]) * v[1]; });
}

template <class Block>
EVT_HD void gate_up_silu_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, gate_up_silu_job(tile, reads, writes));
}

template <class Block>
EVT_HD void gate_up_silu_prologue(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                  const DevBuffer* writes) {
  gemv_prefetch(b, gate_up_silu_job(tile, reads, writes));
}

}  // namespace evt::kernels::llm
