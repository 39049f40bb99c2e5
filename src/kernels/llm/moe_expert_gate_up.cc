// Registry row of a routed expert's gate/up tile; the body is in moe_expert_gate_up.h.

#include "kernels/llm/moe_expert_gate_up.h"

#include <cmath>

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/moe_reference.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void moe_expert_gate_up_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x_mid = a.reads[2], &indptr = a.reads[3],
                   &perm = a.reads[4], &gu_ptr = a.reads[5], &act = a.writes[0];
  const int64_t l = a.tile[0], hidden = x_mid.dim(1), width = act.dim(1), experts = gu_ptr.dim(1) - 1;
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  const int64_t e = ref_tile_expert(gu_ptr.as<const int32_t>() + l * (experts + 1), experts, a.tile[1]);
  if (e < 0) return;
  const int64_t first = a.tile[1] - gu_ptr.as<const int32_t>()[l * (experts + 1) + e];
  const int64_t per_tile = moe_gate_up_rows(cfg.as<const int32_t>(), m.sparse());
  const TiledMatrix w{m.expert_gate_up(e), m.gate_up_shape};
  for (int64_t p = indptr.as<const int32_t>()[e]; p < indptr.as<const int32_t>()[e + 1]; ++p) {
    const int64_t t = perm.as<const int32_t>()[p];
    const RefNormedInput xn = ref_normed_input(x_mid.as<const uint16_t>() + t * hidden, hidden,
                                               ref_weight<uint16_t>(wtab, l, kWpostNorm), cfg_eps(cfg));
    for (int64_t r = first * per_tile; r < (first + 1) * per_tile && r < m.inter; ++r) {
      const double g = xn.dot(w, gate_up_fused_row(r, false), 0, hidden);
      const double u = xn.dot(w, gate_up_fused_row(r, true), 0, hidden);
      act.as<float>()[p * width + r] = static_cast<float>(g / (1 + std::exp(-g)) * u);
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_expert_gate_up, TileFunction{
    .name = "moe_expert_gate_up",
    .summary = "one routed expert's gate/up tile: post-attention RMSNorm, silu(gate) * up for the expert's tokens",
    .num_reads = 7, .num_writes = 1,
    .cpu = moe_expert_gate_up_reference,
    .device_body = "evt::kernels::llm::moe_expert_gate_up_body", .device_header = "kernels/llm/moe_expert_gate_up.h",
    .device_stream = "evt::kernels::llm::moe_expert_gate_up_stream",
    .stream_after = StreamAfter::kGuards,  // the expert is in the plan's tables
    .device_task = "evt::kernels::llm::moe_expert_gate_up_task", .shared = gemv_shared_task(),
    .relative_cost = 2});

}  // namespace evt::kernels::llm
