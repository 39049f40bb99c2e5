// Registry row of the final RMSNorm; the body is in final_norm.h.

#include "kernels/llm/final_norm.h"

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void final_norm_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &x = a.reads[1], &w = a.reads[2], &rows = a.reads[3], &out = a.writes[0];
  const int64_t s = a.tile[0], tokens = x.dim(1), hidden = x.dim(2);
  const int64_t row = rows.as<const int32_t>()[s];
  const std::vector<double> xn =
      ref_rmsnorm(x.as<const float>() + ((cfg_at(cfg, kCfgLayers) % 2) * tokens + row) * hidden, hidden,
                  w.as<const uint16_t>(), cfg_eps(cfg));
  for (int64_t k = 0; k < hidden; ++k) out.as<float>()[s * hidden + k] = static_cast<float>(xn[k]);
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(final_norm, TileFunction{
    .name = "final_norm",
    .summary = "final RMSNorm of one logit row of the last layer's output",
    .num_reads = 4, .num_writes = 1,
    .cpu = final_norm_reference,
    .device_body = "evt::kernels::llm::final_norm_body", .device_header = "kernels/llm/final_norm.h",
    .relative_cost = 0.1});

}  // namespace evt::kernels::llm
