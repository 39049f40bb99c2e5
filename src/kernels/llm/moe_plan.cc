// Registry row of the MoE block's per-layer routing and plan; the body is in moe_plan.h.

#include "kernels/llm/moe_plan.h"

#include <vector>

#include "kernels/llm/moe_reference.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"
#include "util/check.h"

namespace evt::kernels::llm {
namespace {

// Routes every token (as Qwen3MoeTopKRouter, ref_route), then sorts the (token, slot) rows by
// expert, then token, then slot.
void moe_plan_reference(const TileArgs& a) {
  EVT_CHECK(a.wait_counts != nullptr) << "moe_plan sets the wait counts of ACTX and DONE";
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x_mid = a.reads[2], &logits = a.reads[3];
  const BufferView &ids = a.writes[0], &w = a.writes[1];
  const int64_t l = a.tile[0], tokens = x_mid.dim(0), hidden = x_mid.dim(1), slots = ids.dim(1);
  const int64_t experts = a.writes[2].dim(0) - 1;
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  const int64_t used = m.sparse() ? m.top_k : 1;
  EVT_CHECK(experts <= kMaxMoeExperts && used <= slots) << experts << " experts, top-" << used << " of " << slots;
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<RefRoute> chosen =
        m.sparse() ? ref_route(logits.as<const float>() + t * logits.dim(1), m.experts, m.top_k,
                               cfg_at(cfg, kCfgMoeNormTopk) != 0)
                   : std::vector<RefRoute>{{0, 1.0}};
    for (int64_t s = 0; s < slots; ++s) {
      const bool chose = s < static_cast<int64_t>(chosen.size());
      ids.as<int32_t>()[t * slots + s] = chose ? static_cast<int32_t>(chosen[s].expert) : -1;
      w.as<float>()[t * slots + s] = chose ? static_cast<float>(chosen[s].weight) : 0.0f;
    }
  }
  struct Row {
    int64_t expert, token, slot;
  };
  std::vector<Row> rows;
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t s = 0; s < used; ++s) {
        if (ids.as<const int32_t>()[t * slots + s] == e) rows.push_back({e, t, s});
      }
    }
  }
  int32_t *indptr = a.writes[2].as<int32_t>(), *perm = a.writes[3].as<int32_t>(), *pos = a.writes[5].as<int32_t>();
  float* sorted_w = a.writes[4].as<float>();
  for (int64_t r = 0; r < tokens * slots; ++r) {
    pos[r] = perm[r] = -1;
    sorted_w[r] = 0;
  }
  std::vector<int64_t> count(static_cast<size_t>(experts), 0);
  for (size_t p = 0; p < rows.size(); ++p) {
    const Row& r = rows[p];
    ++count[r.expert];
    perm[p] = static_cast<int32_t>(r.token);
    sorted_w[p] = w.as<const float>()[r.token * slots + r.slot];
    pos[r.token * slots + r.slot] = static_cast<int32_t>(p);
  }
  const int64_t gu_tiles = moe_gate_up_tiles(cfg.as<const int32_t>(), m);
  const int64_t dn_tiles = moe_down_tiles(cfg.as<const int32_t>(), m, hidden);
  int32_t *gu = a.writes[6].as<int32_t>() + l * (experts + 1), *dn = a.writes[7].as<int32_t>() + l * (experts + 1);
  indptr[0] = gu[0] = dn[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    indptr[e + 1] = static_cast<int32_t>(indptr[e] + count[e]);
    gu[e + 1] = static_cast<int32_t>(gu[e] + (count[e] > 0 ? gu_tiles : 0));
    dn[e + 1] = static_cast<int32_t>(dn[e] + (count[e] > 0 ? dn_tiles : 0));
    a.wait_counts->set_wait_count(0, l * experts + e, count[e] > 0 ? gu_tiles : 0);  // ACTX
  }
  a.wait_counts->set_wait_count(1, l, dn[experts]);  // DONE
  const int64_t max_gu = a.writes[8].dim(1);
  int32_t* tile_expert = a.writes[8].as<int32_t>() + l * max_gu * kTileEntryWords;
  for (int64_t i = 0; i < max_gu; ++i) {
    put_moe_tile_entry(tile_expert, i, static_cast<int32_t>(ref_tile_expert(gu, experts, i)), indptr);
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_plan, TileFunction{
    .name = "moe_plan",
    .summary = "MoE routing and bookkeeping of a layer: each token's top-k experts and weights, the (token, slot) "
               "rows sorted by expert, each routed expert's tiles and their wait counts",
    .num_reads = 4, .num_writes = 9,
    .cpu = moe_plan_reference,
    .device_body = "evt::kernels::llm::moe_plan_body", .device_header = "kernels/llm/moe_plan.h",
    .relative_cost = 1});

}  // namespace evt::kernels::llm
