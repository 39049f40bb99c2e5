#pragma once
// The MoE block's end (docs/moe_decode.md): tile (l, n) writes rows [n * rows_h, ...) of the next
// layer's residual stream, x[(l + 1) % 2][t, r] = x_mid[t, r] + sum over t's slots s, in order, of
// y_s[pos[t, s], r] (unused slots, pos -1, skipped). A fixed order and no atomics: the sum does not
// depend on which expert tile finished first.
//   reads (cfg, y_s: R x H f32, pos: T x XK i32, x_mid: T x H bf16), writes (x: 2 x T x H bf16)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

template <class Block>
EVT_HD void moe_combine_residual_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[3].dim(0), hidden = reads[3].dim(1), slots = reads[2].dim(1);
  const Range rows = tile_range(tile[1], cfg[kCfgRowsH], hidden);
  const float* y = reads[1].as<const float>();
  const uint16_t* x_mid = reads[3].as<const uint16_t>();
  const int32_t* pos = reads[2].as<const int32_t>();
  uint16_t* out = writes[0].as<uint16_t>() + ((l + 1) % 2) * tokens * hidden;
  const int64_t width = rows.end - rows.begin;
  for (int64_t i = b.thread(); i < tokens * width; i += b.threads()) {
    const int64_t t = i / width, r = rows.begin + i % width;
    // Every slot's loads before any sum (a slot past the last, or unused, loads a row that the sum
    // skips): ptxas issues a load behind a condition only once the one before it has been used.
    int32_t p[kMaxMoeTopK];
    EVT_UNROLL
    for (int s = 0; s < kMaxMoeTopK; ++s) p[s] = pos[t * slots + min_of<int64_t>(s, slots - 1)];
    float v[kMaxMoeTopK];
    EVT_UNROLL
    for (int s = 0; s < kMaxMoeTopK; ++s) v[s] = y[max_of(p[s], 0) * hidden + r];
    float sum = 0;
    EVT_UNROLL
    for (int s = 0; s < kMaxMoeTopK; ++s) sum += s < slots && p[s] >= 0 ? v[s] : 0.0f;
    out[t * hidden + r] = f32_to_bf16(bf16_to_f32(x_mid[t * hidden + r]) + sum);
  }
}

}  // namespace evt::kernels::llm
