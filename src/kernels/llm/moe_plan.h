#pragma once
// The MoE block's bookkeeping for one layer (docs/moe_decode.md), after every token is routed:
// the (token, slot) rows sorted by expert and which tiles each routed expert gets. One task per
// layer; it needs XE words of the block's scratch.
//   reads (cfg, wtab, x_mid: T x H f32 (its shape only), route_ids: T x XK i32, route_w: T x XK f32)
//   writes (exp_indptr: XE+1 i32   expert e's sorted rows are [exp_indptr[e], exp_indptr[e+1])
//           perm: R i32            sorted row -> token (-1 past the last)
//           sorted_w: R f32        sorted row -> its routing weight
//           pos: T x XK i32        (token, slot) -> sorted row (-1 for an unused slot)
//           gu_ptr: L x XE+1 i32   layer l's expert e owns gate/up tiles [gu_ptr[l, e], gu_ptr[l, e+1])
//           dn_ptr: L x XE+1 i32   ... and down tiles [dn_ptr[l, e], dn_ptr[l, e+1])
//           tile_expert: L x MAXGU i32  gate/up tile -> its expert (-1 past the last routed expert's))
//   sets (ACTX: L x XE   expert e's gate/up tiles, the wait count of its activations (0 unrouted),
//         DONE: L        the layer's down tiles)
// A dense layer is one expert (0) with every token. A routed expert gets ceil(inter / rows)
// gate/up tiles and ceil(H / rows) down tiles (moe_gate_up_rows, moe_down_rows).

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

// Every thread of the block: thread e counts and places expert e's rows (scanning the routes in
// (token, slot) order, so each expert's rows come out in the reference's order) and sets its
// wait count, one thread sums the counts up in the block's scratch. A serial pass over the
// experts measured 30 us a layer (and each count set is a release fence).
template <class Block>
EVT_HD void moe_plan_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), slots = reads[3].dim(1);
  const int32_t* ids = reads[3].as<const int32_t>();
  const float* route_w = reads[4].as<const float>();
  int32_t *indptr = writes[0].as<int32_t>(), *perm = writes[1].as<int32_t>(), *pos = writes[3].as<int32_t>();
  float* sorted_w = writes[2].as<float>();
  const int64_t width = writes[4].dim(1);
  int32_t *gu = writes[4].as<int32_t>() + l * width, *dn = writes[5].as<int32_t>() + l * width;
  const int64_t max_gu = writes[6].dim(1);
  int32_t* tile_expert = writes[6].as<int32_t>() + l * max_gu;
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t experts = width - 1, used = m.sparse() ? m.top_k : 1, rows = tokens * slots;
  const int64_t gu_rows = moe_gate_up_rows(cfg, m.sparse()), dn_rows = moe_down_rows(cfg, m.sparse());
  const int64_t gu_tiles = (m.inter + gu_rows - 1) / gu_rows, dn_tiles = (hidden + dn_rows - 1) / dn_rows;
  const auto routed = [&](int64_t r) { return r % slots < used; };  // row r = (token, slot) t * slots + s
  int32_t* count = reinterpret_cast<int32_t*>(b.scratch().data);  // XE words
  for (int64_t e = b.thread(); e < experts; e += b.threads()) {
    int32_t n = 0;
    for (int64_t r = 0; r < rows; ++r) n += routed(r) && ids[r] == e;
    count[e] = n;
  }
  b.sync();
  if (b.thread() == 0) {  // running sums in registers: reading back each stored one cost a round trip
    int32_t rows_so_far = 0, gu_so_far = 0, dn_so_far = 0;
    indptr[0] = gu[0] = dn[0] = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const bool any = count[e] > 0;
      indptr[e + 1] = rows_so_far += count[e];
      gu[e + 1] = gu_so_far += any ? static_cast<int32_t>(gu_tiles) : 0;
      dn[e + 1] = dn_so_far += any ? static_cast<int32_t>(dn_tiles) : 0;
    }
    b.set_wait_count(1, l, dn_so_far);
  }
  b.sync();
  for (int64_t e = b.thread(); e < experts; e += b.threads()) {
    b.set_wait_count(0, l * experts + e, count[e] > 0 ? gu_tiles : 0);
    int32_t p = indptr[e];
    const int32_t end = indptr[e + 1];
    for (int64_t r = 0; r < rows && p < end; ++r) {
      if (!routed(r) || ids[r] != e) continue;
      perm[p] = static_cast<int32_t>(r / slots);
      sorted_w[p] = route_w[r];
      pos[r] = p++;
    }
  }
  for (int64_t i = b.thread(); i < max_gu; i += b.threads()) {
    tile_expert[i] = static_cast<int32_t>(moe_tile_expert(gu, experts, i));
  }
  for (int64_t r = b.thread(); r < rows; r += b.threads()) {
    if (!routed(r)) pos[r] = -1;
    if (r >= indptr[experts]) {
      perm[r] = -1;
      sorted_w[r] = 0;
    }
  }
}

}  // namespace evt::kernels::llm
