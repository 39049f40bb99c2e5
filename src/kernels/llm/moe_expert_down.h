#pragma once
// One routed expert's down tile (docs/moe_decode.md): tile (l, i) belongs to the expert e whose range
// [dn_ptr[l, e], dn_ptr[l, e+1]) holds i (read from tile_expert, with e's rows: the same routed
// expert's gate/up tiles' entry), and writes rows [(i - dn_ptr[l, e]) * rows_h, ...) of
// y_s[p] = sorted_w[p] * down_e act_s[p] for the expert's sorted rows p. The routing weight is
// applied here; moe_combine_residual adds each token's slots in order.
//   reads (cfg, wtab, act_s: R x XI f32, exp_indptr: XE+1 i32 (the reference's: the body has the rows
//          from tile_expert), sorted_w: R f32, dn_ptr: L x XE+1 i32, tile_expert: L x MAXGU x 3 i32),
//   writes (y_s: R x H f32)

#include "kernels/llm/moe_expert_gate_up.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask moe_expert_down_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], width = reads[2].dim(1), hidden = writes[0].dim(1);
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t max_gu = reads[6].dim(1), dn_tiles = moe_down_tiles(cfg, m, hidden);
  const MoeTileEntry t = moe_down_tile_entry(reads[6].as<const int32_t>() + l * max_gu * kTileEntryWords, max_gu,
                                             moe_gate_up_tiles(cfg, m), dn_tiles, tile[1]);
  const int64_t e = t.expert, p0 = t.row0;
  const Range rows = e < 0 ? Range{0, 0} : tile_range(tile[1] % dn_tiles, moe_down_rows(cfg, m.sparse()), hidden);
  const float* w = reads[4].as<const float>() + p0;
  float* out = writes[0].as<float>() + p0 * hidden;
  const GemvInput in{.x = reads[2].as<const float>() + p0 * width, .ld = width, .tokens = t.rows};
  return gemv_task(1, in, m.expert_down(e < 0 ? 0 : e), m.down_shape, rows.begin / kTileRows, tile_groups(rows), 0,
                   m.inter, hidden, GemvOutput{.out = out, .ld = hidden, .token_scale = w});
}

template <class Block>
EVT_HD void moe_expert_down_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, moe_expert_down_task(tile, reads, writes));
}

template <class Block>
EVT_HD WeightStream moe_expert_down_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                           const DevBuffer* writes) {
  return gemv_stream(b, moe_expert_down_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
