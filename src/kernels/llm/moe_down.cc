// The MoE block as one naive reference, second half (registry row, CPU only; see moe_gate_up.cc).
// Tile (l, n) writes rows [n * rows_h, ...) of the next layer's residual stream for
// every token: the routing-weighted sum of the chosen experts' down projections plus the residual,
//   x[(l + 1) % 2][t, r] = x_mid[t, r] + sum_s route_w[t, s] * (down_e[r] . act[t, s * inter ...]),
// e = route_ids[t, s], slots with id -1 skipped. A dense layer (one expert, weight 1) computes
// exactly what down_proj does.
//   reads (cfg, wtab, act: T x XA f32, route_ids: T x XK i32, route_w: T x XK f32, x_mid: T x H bf16),
//   writes (x: 2 x T x H bf16)

#include "kernels/llm/moe_layout.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void moe_down_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &act = a.reads[2], &ids = a.reads[3], &weights = a.reads[4],
                   &x_mid = a.reads[5], &x = a.writes[0];
  const int64_t l = a.tile[0], tokens = act.dim(0), width = act.dim(1), slots = ids.dim(1), hidden = x_mid.dim(1);
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  const Range rows = tile_range(a.tile[1], cfg_at(cfg, kCfgRowsH), hidden);
  uint16_t* out = x.as<uint16_t>() + ((l + 1) % 2) * tokens * hidden;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = rows.begin; r < rows.end; ++r) {
      double sum = bf16_to_f32(x_mid.as<const uint16_t>()[t * hidden + r]);
      for (int64_t s = 0; s < slots; ++s) {
        const int32_t e = ids.as<const int32_t>()[t * slots + s];
        if (e < 0) continue;
        const TiledMatrix w{m.expert_down(e), m.down_shape};
        sum += weights.as<const float>()[t * slots + s] *
               ref_dot(w, r, 0, m.inter, act.as<const float>() + t * width + s * m.inter);
      }
      out[t * hidden + r] = f32_to_bf16(static_cast<float>(sum));
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_down, TileFunction{
    .name = "moe_down",
    .summary = "routing-weighted sum of the chosen experts' down projections plus the residual into the next "
               "layer's stream, one row tile, every token",
    .num_reads = 6, .num_writes = 1,
    .cpu = moe_down_reference,
    .relative_cost = 2});

}  // namespace evt::kernels::llm
