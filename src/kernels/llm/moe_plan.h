#pragma once
// The MoE block's bookkeeping for one layer (docs/moe_decode.md), after every token is routed:
// the (token, slot) rows sorted by expert and which tiles each routed expert gets. One task per
// layer, serial.
//   reads (cfg, wtab, x_mid: T x H f32 (its shape only), route_ids: T x XK i32, route_w: T x XK f32)
//   writes (exp_indptr: XE+1 i32   expert e's sorted rows are [exp_indptr[e], exp_indptr[e+1])
//           perm: R i32            sorted row -> token (-1 past the last)
//           sorted_w: R f32        sorted row -> its routing weight
//           pos: T x XK i32        (token, slot) -> sorted row (-1 for an unused slot)
//           gu_ptr: L x XE+1 i32   layer l's expert e owns gate/up tiles [gu_ptr[l, e], gu_ptr[l, e+1])
//           dn_ptr: L x XE+1 i32   ... and down tiles [dn_ptr[l, e], dn_ptr[l, e+1]))
// A dense layer is one expert (0) with every token. A routed expert gets ceil(inter / rows_xi)
// gate/up tiles and ceil(H / rows_h) down tiles.

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

template <class Block>
EVT_HD void moe_plan_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  if (b.thread() != 0) return;
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), slots = reads[3].dim(1);
  const int32_t* ids = reads[3].as<const int32_t>();
  const float* route_w = reads[4].as<const float>();
  int32_t *indptr = writes[0].as<int32_t>(), *perm = writes[1].as<int32_t>(), *pos = writes[3].as<int32_t>();
  float* sorted_w = writes[2].as<float>();
  const int64_t width = writes[4].dim(1);
  int32_t *gu = writes[4].as<int32_t>() + l * width, *dn = writes[5].as<int32_t>() + l * width;
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t experts = width - 1, used = m.sparse() ? m.top_k : 1;
  const int64_t gu_tiles = (m.inter + cfg[kCfgMoeRowsXI] - 1) / cfg[kCfgMoeRowsXI];
  const int64_t dn_tiles = (hidden + cfg[kCfgRowsH] - 1) / cfg[kCfgRowsH];
  int32_t count[kMaxMoeExperts] = {}, fill[kMaxMoeExperts] = {};
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < used; ++s) ++count[ids[t * slots + s]];
  }
  indptr[0] = gu[0] = dn[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    indptr[e + 1] = indptr[e] + count[e];
    gu[e + 1] = gu[e] + (count[e] > 0 ? static_cast<int32_t>(gu_tiles) : 0);
    dn[e + 1] = dn[e] + (count[e] > 0 ? static_cast<int32_t>(dn_tiles) : 0);
  }
  for (int64_t p = indptr[experts]; p < tokens * slots; ++p) {
    perm[p] = -1;
    sorted_w[p] = 0;
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < slots; ++s) {
      if (s >= used) {
        pos[t * slots + s] = -1;
        continue;
      }
      const int32_t e = ids[t * slots + s], p = indptr[e] + fill[e]++;
      perm[p] = static_cast<int32_t>(t);
      sorted_w[p] = route_w[t * slots + s];
      pos[t * slots + s] = p;
    }
  }
}

}  // namespace evt::kernels::llm
