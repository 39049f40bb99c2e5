#pragma once
// The LM head: tile n writes vocab rows [n * rows_v, ...) of logits = xf W^T for every row.
//   reads (cfg, xf: S x H f32, lm_w: the V x H matrix, tiled), writes (logits: S x V f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"

namespace evt::kernels::llm {

EVT_HD inline auto lm_head_job(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t rows_in = reads[1].dim(0), hidden = reads[1].dim(1), vocab = writes[0].dim(1);
  float* out = writes[0].as<float>();
  const Range rows = tile_range(tile[0], cfg[kCfgRowsV], vocab);
  return gemv_job<1>(GemvInput{.x = reads[1].as<const float>(), .ld = hidden, .tokens = rows_in},
                     reads[2].as<const uint16_t>(), vocab, rows.begin / kTileRows, tile_groups(rows), 0, hidden, vocab,
                     [=](int64_t s, int64_t r, const float* v) { out[s * vocab + r] = v[0]; });
}

template <class Block>
EVT_HD void lm_head_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, lm_head_job(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream lm_head_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                   const DevBuffer* writes) {
  return gemv_stream(b, lm_head_job(tile, reads, writes));
}

}  // namespace evt::kernels::llm
