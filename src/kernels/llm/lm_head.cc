// Registry row of the LM head; the body is in lm_head.h.

#include "kernels/llm/lm_head.h"

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void lm_head_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &x = a.reads[1], &final_w = a.reads[2], &logit_rows = a.reads[3];
  const BufferView &w = a.reads[4], &out = a.writes[0], &best = a.writes[1];
  const int64_t tokens = x.dim(1), hidden = x.dim(2), seqs = out.dim(0), vocab = out.dim(1);
  const int64_t panel = cfg_at(cfg, kCfgRowsV), per_tile = panel * cfg_at(cfg, kCfgLmRounds), tiles = best.dim(1);
  const TiledMatrix lm = ref_tiled(w.as<const uint16_t>(), vocab, hidden, panel);
  for (int64_t s = 0; s < seqs; ++s) {
    const uint16_t* row =
        x.as<const uint16_t>() + ((cfg_at(cfg, kCfgLayers) % 2) * tokens + logit_rows.as<const int32_t>()[s]) * hidden;
    const RefNormedInput xn = ref_normed_input(row, hidden, final_w.as<const uint16_t>(), cfg_eps(cfg));
    float* best_s = best.as<float>() + (s * tiles + a.tile[0]) * 2;
    best_s[0] = -INFINITY;
    best_s[1] = static_cast<float>(vocab);
    for (int64_t r = a.tile[0] * per_tile; r < (a.tile[0] + 1) * per_tile && r < vocab; ++r) {
      const float logit = static_cast<float>(xn.dot(lm, r, 0, hidden));
      out.as<float>()[s * vocab + r] = logit;
      // The first largest, a NaN before any number (sample.h's order).
      const bool nan = logit != logit, best_nan = best_s[0] != best_s[0];
      if ((nan && !best_nan) || (!nan && !best_nan && logit > best_s[0])) {
        best_s[0] = logit;
        best_s[1] = static_cast<float>(r);
      }
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(lm_head, TileFunction{
    .name = "lm_head",
    .summary = "final RMSNorm and LM head: one vocab tile of the logits of every logit row, and its largest logit",
    .num_reads = 5, .num_writes = 2,
    .cpu = lm_head_reference,
    .device_body = "evt::kernels::llm::lm_head_body", .device_header = "kernels/llm/lm_head.h",
    .device_stream = "evt::kernels::llm::lm_head_stream",
    .relative_cost = 1});

}  // namespace evt::kernels::llm
