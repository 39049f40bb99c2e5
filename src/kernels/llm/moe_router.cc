// Registry row of the MoE router; the body is in moe_router.h.

#include "kernels/llm/moe_router.h"

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void moe_router_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x_mid = a.reads[2], &out = a.writes[0];
  const int64_t l = a.tile[0], tokens = x_mid.dim(0), hidden = x_mid.dim(1), width = out.dim(1);
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  if (!m.sparse()) return;
  const TiledMatrix w{m.router, m.router_shape};
  const RouterTile rt = router_tile(cfg.as<const int32_t>(), tokens, a.tile[1]);
  const Range rows = tile_range(rt.experts_tile, cfg_at(cfg, kCfgMoeRowsE), m.experts);
  for (int64_t t = rt.first_token; t < tokens && t < rt.first_token + kPassTokens; ++t) {
    const RefNormedInput xn = ref_normed_input(x_mid.as<const uint16_t>() + t * hidden, hidden,
                                               ref_weight<uint16_t>(wtab, l, kWpostNorm), cfg_eps(cfg));
    for (int64_t e = rows.begin; e < rows.end; ++e) out.as<float>()[t * width + e] = static_cast<float>(xn.dot(w, e, 0, hidden));
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_router, TileFunction{
    .name = "moe_router",
    .summary = "post-attention RMSNorm and the MoE router's logits for a tile of experts and a pass of tokens",
    .num_reads = 3, .num_writes = 1,
    .cpu = moe_router_reference,
    .device_body = "evt::kernels::llm::moe_router_body", .device_header = "kernels/llm/moe_router.h",
    .device_stream = "evt::kernels::llm::moe_router_stream",
    .device_task = "evt::kernels::llm::moe_router_task", .shared = gemv_shared_task(),
    .relative_cost = 1});

}  // namespace evt::kernels::llm
