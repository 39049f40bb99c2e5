// Registry row of the MLP's gate/up projection; the body is in gate_up_silu.h.

#include "kernels/llm/gate_up_silu.h"

#include <cmath>

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void gate_up_silu_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x_mid = a.reads[2], &out = a.writes[0];
  const int64_t l = a.tile[0], tokens = x_mid.dim(0), hidden = x_mid.dim(1), inter = out.dim(1);
  const int64_t per_tile = cfg_at(cfg, kCfgRowsI);
  const TiledMatrix w = ref_tiled(wtab, l, kWgateUp, 2 * inter, hidden, 2 * per_tile);
  for (int64_t t = 0; t < tokens; ++t) {
    const RefNormedInput xn = ref_normed_input(x_mid.as<const uint16_t>() + t * hidden, hidden,
                                               ref_weight<uint16_t>(wtab, l, kWpostNorm), cfg_eps(cfg));
    for (int64_t r = a.tile[1] * per_tile; r < (a.tile[1] + 1) * per_tile && r < inter; ++r) {
      const double g = xn.dot(w, gate_up_fused_row(r, false), 0, hidden);
      const double u = xn.dot(w, gate_up_fused_row(r, true), 0, hidden);
      out.as<uint16_t>()[t * inter + r] = f32_to_bf16(static_cast<float>(g / (1 + std::exp(-g)) * u));
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(gate_up_silu, TileFunction{
    .name = "gate_up_silu",
    .summary = "post-attention RMSNorm, gate and up projections, silu(gate) * up; one column tile, every token",
    .num_reads = 3, .num_writes = 1,
    .cpu = gate_up_silu_reference,
    .device_body = "evt::kernels::llm::gate_up_silu_body", .device_header = "kernels/llm/gate_up_silu.h",
    .device_stream = "evt::kernels::llm::gate_up_silu_stream",
    .device_task = "evt::kernels::llm::gate_up_silu_task", .shared = gemv_shared_task(),
    .relative_cost = 2});

}  // namespace evt::kernels::llm
