// Registry row of the MoE routing tile; the body is in moe_topk.h.

#include "kernels/llm/moe_topk.h"

#include "kernels/llm/moe_reference.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void moe_topk_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &logits = a.reads[2], &ids = a.writes[0], &w = a.writes[1];
  const int64_t l = a.tile[0], t = a.tile[1], slots = ids.dim(1);
  const bool sparse = ref_weight<uint16_t>(wtab, l, kWrouter) != nullptr;
  const std::vector<RefRoute> chosen =
      sparse ? ref_route(logits.as<const float>() + t * logits.dim(1), cfg_at(cfg, kCfgMoeExperts),
                         cfg_at(cfg, kCfgMoeTopK), cfg_at(cfg, kCfgMoeNormTopk) != 0)
             : std::vector<RefRoute>{{0, 1.0}};
  for (int64_t s = 0; s < slots; ++s) {
    const bool used = s < static_cast<int64_t>(chosen.size());
    ids.as<int32_t>()[t * slots + s] = used ? static_cast<int32_t>(chosen[s].expert) : -1;
    w.as<float>()[t * slots + s] = used ? static_cast<float>(chosen[s].weight) : 0.0f;
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_topk, TileFunction{
    .name = "moe_topk",
    .summary = "MoE routing of one token: softmax of its router logits, top-k, renormalized weights",
    .num_reads = 3, .num_writes = 2,
    .cpu = moe_topk_reference,
    .device_body = "evt::kernels::llm::moe_topk_body", .device_header = "kernels/llm/moe_topk.h",
    .relative_cost = 0.2});

}  // namespace evt::kernels::llm
