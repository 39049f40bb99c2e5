// The MoE block as one naive reference, first half (registry row, CPU only): the spec the block's
// tiles (docs/moe_decode.md) are checked against in tests/kernels/moe_block_test.cc, as the MoE
// fixture ties it to Hugging Face; phase 1's MoE decode graph ran it.
// Tile (l, t): token t's post-attention RMSNorm, its routing, and the SwiGLU activations of the
// experts it chose, one after another in its act row:
//   act[t, s * inter + r] = silu(xn . gate_e[r]) * (xn . up_e[r]) for the expert e in slot s.
// A dense layer of the model (moe_layout.h) is one expert of weight 1 in slot 0.
//   reads (cfg, wtab, x_mid: T x H bf16), writes (act: T x XA f32, route_ids: T x XK i32,
//   route_w: T x XK f32); slots past the layer's top-k get id -1 and weight 0.

#include <cmath>

#include "kernels/llm/moe_layout.h"
#include "kernels/llm/moe_reference.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"
#include "util/check.h"

namespace evt::kernels::llm {
namespace {

// The router's logits for one token, from the bf16-rounded input every projection takes.
std::vector<double> router_logits(const LayerMlp& m, const RefNormedInput& xn, int64_t hidden) {
  const TiledMatrix router{m.router, m.router_shape};
  std::vector<double> logits(static_cast<size_t>(m.experts));
  for (int64_t e = 0; e < m.experts; ++e) logits[e] = xn.dot(router, e, 0, hidden);
  return logits;
}

void moe_gate_up_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x_mid = a.reads[2];
  const BufferView &act = a.writes[0], &ids = a.writes[1], &weights = a.writes[2];
  const int64_t l = a.tile[0], t = a.tile[1], hidden = x_mid.dim(1), width = act.dim(1), slots = ids.dim(1);
  const LayerMlp m = layer_mlp(cfg.as<const int32_t>(), wtab.as<const int64_t>(), l, hidden);
  EVT_CHECK(m.top_k <= slots && m.top_k * m.inter <= width)
      << "layer " << l << ": " << m.top_k << " experts of " << m.inter << " do not fit act rows of " << width;
  const RefNormedInput xn = ref_normed_input(x_mid.as<const uint16_t>() + t * hidden, hidden,
                                             ref_weight<uint16_t>(wtab, l, kWpostNorm), cfg_eps(cfg));
  const std::vector<RefRoute> chosen =
      m.sparse() ? ref_route(router_logits(m, xn, hidden).data(), m.experts, m.top_k, cfg_at(cfg, kCfgMoeNormTopk) != 0)
                 : std::vector<RefRoute>{{0, 1.0}};
  for (int64_t s = 0; s < slots; ++s) {
    const bool used = s < static_cast<int64_t>(chosen.size());
    ids.as<int32_t>()[t * slots + s] = used ? static_cast<int32_t>(chosen[s].expert) : -1;
    weights.as<float>()[t * slots + s] = used ? static_cast<float>(chosen[s].weight) : 0.0f;
  }
  for (size_t s = 0; s < chosen.size(); ++s) {
    const TiledMatrix w{m.expert_gate_up(chosen[s].expert), m.gate_up_shape};
    float* out = act.as<float>() + t * width + static_cast<int64_t>(s) * m.inter;
    for (int64_t r = 0; r < m.inter; ++r) {
      const double g = xn.dot(w, gate_up_fused_row(r, false), 0, hidden);
      const double u = xn.dot(w, gate_up_fused_row(r, true), 0, hidden);
      out[r] = static_cast<float>(g / (1 + std::exp(-g)) * u);
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_gate_up, TileFunction{
    .name = "moe_gate_up",
    .summary = "post-attention RMSNorm, MoE routing (softmax, top-k) and the chosen experts' silu(gate) * up; "
               "one token (a dense layer: its MLP as one expert)",
    .num_reads = 3, .num_writes = 3,
    .cpu = moe_gate_up_reference,
    .relative_cost = 4});

}  // namespace evt::kernels::llm
