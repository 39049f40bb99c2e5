// Registry row of the embedding gather; the body is in embed_gather.h.

#include "kernels/llm/embed_gather.h"

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void embed_gather_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &ids = a.reads[1], &embed = a.reads[2], &x = a.writes[0];
  const int64_t tokens = x.dim(1), hidden = x.dim(2), per_tile = cfg_at(cfg, kCfgRowsH);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t id = ids.as<const int32_t>()[t];
    for (int64_t c = a.tile[0] * per_tile; c < (a.tile[0] + 1) * per_tile && c < hidden; ++c) {
      x.as<uint16_t>()[t * hidden + c] = embed.as<const uint16_t>()[id * hidden + c];
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(embed_gather, TileFunction{
    .name = "embed_gather",
    .summary = "embedding rows of the step's tokens into layer 0 of the residual stream, one column tile",
    .num_reads = 3, .num_writes = 1,
    .cpu = embed_gather_reference,
    .device_body = "evt::kernels::llm::embed_gather_body", .device_header = "kernels/llm/embed_gather.h",
    .relative_cost = 0.1});

}  // namespace evt::kernels::llm
