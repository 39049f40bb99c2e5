// Registry row of the attention output projection; the body is in o_proj.h.

#include "kernels/llm/o_proj.h"

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void o_proj_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &attn = a.reads[2], &x = a.reads[3], &out = a.writes[0];
  const int64_t l = a.tile[0], tokens = attn.dim(0), width = attn.dim(1), hidden = out.dim(1);
  ref_residual_projection(ref_weight<uint16_t>(wtab, l, kWo), attn.as<const uint16_t>(), tokens, width, hidden, a.tile[1],
                          cfg_at(cfg, kCfgRowsH), x.as<const uint16_t>() + (l % 2) * tokens * hidden, out.as<uint16_t>());
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(o_proj, TileFunction{
    .name = "o_proj",
    .summary = "attention output projection plus the residual, one row tile, every token",
    .num_reads = 4, .num_writes = 1,
    .cpu = o_proj_reference,
    .device_body = "evt::kernels::llm::o_proj_body", .device_header = "kernels/llm/o_proj.h",
    .device_stream = "evt::kernels::llm::o_proj_stream",
    .device_task = "evt::kernels::llm::o_proj_task", .shared = gemv_shared_task(),
    .relative_cost = 1});

}  // namespace evt::kernels::llm
