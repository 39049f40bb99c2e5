#pragma once
// One routed expert's gate/up tile (docs/moe_decode.md): tile (l, i) belongs to the expert e whose
// range [gu_ptr[l, e], gu_ptr[l, e+1]) holds i (tile_expert[l, i], the plan's entry of it, which
// holds e's rows [exp_indptr[e], exp_indptr[e+1]) too), and
// writes outputs [(i - gu_ptr[l, e]) * rows_xi, ...)
// of silu(xn gate_e^T) * (xn up_e^T) for the expert's tokens, at their sorted rows:
// act_s[p, n] for p in [exp_indptr[e], exp_indptr[e+1]), token perm[p], xn its post-attention
// RMSNorm (fused). So each routed expert's weights are read once per step, whatever its tokens.
// A tile past the last expert's range does nothing (the graph never releases it).
//   reads (cfg, wtab, x_mid: T x H bf16, exp_indptr: XE+1 i32 (the reference's: the body has the rows
//          from tile_expert), perm: R i32, gu_ptr: L x XE+1 i32, tile_expert: L x MAXGU x 3 i32),
//   writes (act_s: R x XI f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

EVT_HD inline GemvTask moe_expert_gate_up_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], hidden = reads[2].dim(1), width = writes[0].dim(1);
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t max_gu = reads[6].dim(1), gu_tiles = moe_gate_up_tiles(cfg, m);
  const MoeTileEntry t = moe_tile_entry(reads[6].as<const int32_t>() + l * max_gu * kTileEntryWords, tile[1]);
  const int64_t e = t.expert, p0 = t.row0;
  const Range rows = e < 0 ? Range{0, 0} : tile_range(tile[1] % gu_tiles, moe_gate_up_rows(cfg, m.sparse()), m.inter);
  float* out = writes[0].as<float>() + p0 * width;
  const GemvInput in{.x = reads[2].as<const uint16_t>(), .bf16 = true, .ld = hidden, .tokens = t.rows,
                     .rows = reads[4].as<const int32_t>() + p0,
                     .norm_w = weight<uint16_t>(reads[1], l, kWpostNorm), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  return gemv_task(2, in, m.expert_gate_up(e < 0 ? 0 : e), m.gate_up_shape, rows.begin / 8,
                   (rows.end - rows.begin + 7) / 8, 0, hidden, m.inter, GemvOutput{.out = out, .ld = width});
}

template <class Block>
EVT_HD void moe_expert_gate_up_body(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                    const DevBuffer* writes) {
  gemv_run(b, moe_expert_gate_up_task(tile, reads, writes));
}

// The stream reads tile_expert, which moe_plan writes before it notifies EXP: under the static
// schedule the loader waits for EXP[l] itself (StreamAfter::kGuards; docs/moe_decode.md). A tile
// past the routed experts' range streams nothing, as the trigger skips it.
template <class Block>
EVT_HD WeightStream moe_expert_gate_up_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                              const DevBuffer* writes) {
  return gemv_stream(b, moe_expert_gate_up_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
