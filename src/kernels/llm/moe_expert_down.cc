// Registry row of a routed expert's down tile; the body is in moe_expert_down.h.

#include "kernels/llm/moe_expert_down.h"

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/moe_reference.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void moe_expert_down_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &act = a.reads[2], &indptr = a.reads[3],
                   &sorted_w = a.reads[4], &dn_ptr = a.reads[5], &y = a.writes[0];
  const int64_t l = a.tile[0], width = act.dim(1), hidden = y.dim(1), experts = dn_ptr.dim(1) - 1;
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  const int32_t* ptr = dn_ptr.as<const int32_t>() + l * (experts + 1);
  const int64_t e = ref_tile_expert(ptr, experts, a.tile[1]);
  if (e < 0) return;
  const int64_t per_tile = moe_down_rows(cfg.as<const int32_t>(), m.sparse());
  const int64_t first = (a.tile[1] - ptr[e]) * per_tile;
  const TiledMatrix w{m.expert_down(e), m.down_shape};
  for (int64_t p = indptr.as<const int32_t>()[e]; p < indptr.as<const int32_t>()[e + 1]; ++p) {
    for (int64_t r = first; r < first + per_tile && r < hidden; ++r) {
      const double dot = ref_dot(w, r, 0, m.inter, act.as<const float>() + p * width);
      y.as<float>()[p * hidden + r] = static_cast<float>(sorted_w.as<const float>()[p] * dot);
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_expert_down, TileFunction{
    .name = "moe_expert_down",
    .summary = "one routed expert's down tile, scaled by each row's routing weight",
    .num_reads = 7, .num_writes = 1,
    .cpu = moe_expert_down_reference,
    .device_body = "evt::kernels::llm::moe_expert_down_body", .device_header = "kernels/llm/moe_expert_down.h",
    .device_stream = "evt::kernels::llm::moe_expert_down_stream",
    .stream_after = StreamAfter::kGuards,  // the expert is in the plan's tables
    .device_task = "evt::kernels::llm::moe_expert_down_task", .shared = gemv_shared_task(),
    .relative_cost = 1});

}  // namespace evt::kernels::llm
