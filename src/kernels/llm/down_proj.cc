// Registry row of the MLP's down projection; the body is in down_proj.h.

#include "kernels/llm/down_proj.h"

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void down_proj_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &act = a.reads[2], &x_mid = a.reads[3], &x = a.writes[0];
  const int64_t l = a.tile[0], tokens = act.dim(0), inter = act.dim(1), hidden = x_mid.dim(1);
  ref_residual_projection(ref_weight<uint16_t>(wtab, l, kWdown), act.as<const uint16_t>(), tokens, inter, hidden,
                          a.tile[1], cfg_at(cfg, kCfgRowsH), x_mid.as<const uint16_t>(),
                          x.as<uint16_t>() + ((l + 1) % 2) * tokens * hidden);
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(down_proj, TileFunction{
    .name = "down_proj",
    .summary = "MLP down projection plus the residual into the next layer's stream, one row tile, every token",
    .num_reads = 4, .num_writes = 1,
    .cpu = down_proj_reference,
    .device_body = "evt::kernels::llm::down_proj_body", .device_header = "kernels/llm/down_proj.h",
    .device_stream = "evt::kernels::llm::down_proj_stream",
    .device_task = "evt::kernels::llm::down_proj_task", .shared = gemv_shared_task(),
    .relative_cost = 1});

}  // namespace evt::kernels::llm
