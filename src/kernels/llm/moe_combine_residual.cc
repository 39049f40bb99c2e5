// Registry row of the MoE block's combine; the body is in moe_combine_residual.h.

#include "kernels/llm/moe_combine_residual.h"

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void moe_combine_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &y = a.reads[1], &pos = a.reads[2], &x_mid = a.reads[3], &x = a.writes[0];
  const int64_t l = a.tile[0], tokens = x_mid.dim(0), hidden = x_mid.dim(1), slots = pos.dim(1);
  const int64_t per_tile = cfg_at(cfg, kCfgRowsH);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = a.tile[1] * per_tile; r < (a.tile[1] + 1) * per_tile && r < hidden; ++r) {
      double sum = bf16_to_f32(x_mid.as<const uint16_t>()[t * hidden + r]);
      for (int64_t s = 0; s < slots; ++s) {
        const int32_t p = pos.as<const int32_t>()[t * slots + s];
        if (p >= 0) sum += y.as<const float>()[p * hidden + r];
      }
      x.as<uint16_t>()[((l + 1) % 2) * tokens * hidden + t * hidden + r] = f32_to_bf16(static_cast<float>(sum));
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_combine_residual, TileFunction{
    .name = "moe_combine_residual",
    .summary = "residual plus the sum of a token's weighted expert outputs, one row tile, every token",
    .num_reads = 4, .num_writes = 1,
    .cpu = moe_combine_reference,
    .device_body = "evt::kernels::llm::moe_combine_residual_body", .device_header = "kernels/llm/moe_combine_residual.h",
    .relative_cost = 0.5});

}  // namespace evt::kernels::llm
