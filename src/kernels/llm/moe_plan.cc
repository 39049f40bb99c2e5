// Registry row of the MoE block's per-layer plan; the body is in moe_plan.h.

#include "kernels/llm/moe_plan.h"

#include <vector>

#include "kernels/llm/moe_reference.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"
#include "util/check.h"

namespace evt::kernels::llm {
namespace {

// Sorted rows are the (token, slot) pairs ordered by expert, then token, then slot.
void moe_plan_reference(const TileArgs& a) {
  EVT_CHECK(a.wait_counts != nullptr) << "moe_plan sets the wait counts of ACTX and DONE";
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x_mid = a.reads[2], &ids = a.reads[3], &w = a.reads[4];
  const int64_t l = a.tile[0], tokens = x_mid.dim(0), hidden = x_mid.dim(1), slots = ids.dim(1);
  const int64_t experts = a.writes[0].dim(0) - 1;
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  const int64_t used = m.sparse() ? m.top_k : 1;
  EVT_CHECK(experts <= kMaxMoeExperts && used <= slots) << experts << " experts, top-" << used << " of " << slots;
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
  const auto out = [&](int k) { return a.writes[k].as<int32_t>(); };
  for (int64_t t = 0; t < tokens * slots; ++t) {
    out(3)[t] = -1;
    out(1)[t] = -1;
    a.writes[2].as<float>()[t] = 0;
  }
  std::vector<int64_t> count(static_cast<size_t>(experts), 0);
  for (size_t p = 0; p < rows.size(); ++p) {
    const Row& r = rows[p];
    ++count[r.expert];
    out(1)[p] = static_cast<int32_t>(r.token);
    a.writes[2].as<float>()[p] = w.as<const float>()[r.token * slots + r.slot];
    out(3)[r.token * slots + r.slot] = static_cast<int32_t>(p);
  }
  const int64_t gu_rows = moe_gate_up_rows(cfg.as<const int32_t>(), m.sparse());
  const int64_t dn_rows = moe_down_rows(cfg.as<const int32_t>(), m.sparse());
  const int64_t gu_tiles = (m.inter + gu_rows - 1) / gu_rows, dn_tiles = (hidden + dn_rows - 1) / dn_rows;
  int32_t *indptr = out(0), *gu = out(4) + l * (experts + 1), *dn = out(5) + l * (experts + 1);
  indptr[0] = gu[0] = dn[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    indptr[e + 1] = static_cast<int32_t>(indptr[e] + count[e]);
    gu[e + 1] = static_cast<int32_t>(gu[e] + (count[e] > 0 ? gu_tiles : 0));
    dn[e + 1] = static_cast<int32_t>(dn[e] + (count[e] > 0 ? dn_tiles : 0));
    a.wait_counts->set_wait_count(0, l * experts + e, count[e] > 0 ? gu_tiles : 0);  // ACTX
  }
  a.wait_counts->set_wait_count(1, l, dn[experts]);  // DONE
  const int64_t max_gu = a.writes[6].dim(1);
  for (int64_t i = 0; i < max_gu; ++i) out(6)[l * max_gu + i] = static_cast<int32_t>(ref_tile_expert(gu, experts, i));
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_plan, TileFunction{
    .name = "moe_plan",
    .summary = "MoE bookkeeping of a layer: the (token, slot) rows sorted by expert, each routed expert's tiles "
               "and their wait counts",
    .num_reads = 5, .num_writes = 7,
    .cpu = moe_plan_reference,
    .device_body = "evt::kernels::llm::moe_plan_body", .device_header = "kernels/llm/moe_plan.h",
    .relative_cost = 1});

}  // namespace evt::kernels::llm
