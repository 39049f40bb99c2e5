// Registry row of the LM head; the body is in lm_head.h.

#include "kernels/llm/lm_head.h"

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void lm_head_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &xf = a.reads[1], &w = a.reads[2], &out = a.writes[0];
  const int64_t rows_in = xf.dim(0), hidden = xf.dim(1), vocab = out.dim(1), per_tile = cfg_at(cfg, kCfgRowsV);
  const TiledMatrix lm = ref_tiled(w.as<const uint16_t>(), vocab);
  for (int64_t s = 0; s < rows_in; ++s) {
    for (int64_t r = a.tile[0] * per_tile; r < (a.tile[0] + 1) * per_tile && r < vocab; ++r) {
      out.as<float>()[s * vocab + r] =
          static_cast<float>(ref_dot(lm, r, 0, hidden, xf.as<const float>() + s * hidden));
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(lm_head, TileFunction{
    .name = "lm_head",
    .summary = "LM head: one vocab tile of the logits of every logit row",
    .num_reads = 3, .num_writes = 1,
    .cpu = lm_head_reference,
    .device_body = "evt::kernels::llm::lm_head_body", .device_header = "kernels/llm/lm_head.h",
    .device_stream = "evt::kernels::llm::lm_head_stream",
    .relative_cost = 1});

}  // namespace evt::kernels::llm
