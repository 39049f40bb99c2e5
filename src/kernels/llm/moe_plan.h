#pragma once
// The MoE block's routing and bookkeeping for one layer (docs/moe_decode.md), once the router's
// logits are in: every token's top-k experts and weights, the (token, slot) rows sorted by
// expert, and which tiles each routed expert gets. One task per layer.
//   reads (cfg, wtab, x_mid: T x H f32 (its shape only), router_logits: T x XE f32)
//   writes (route_ids: T x XK i32     token t's experts, best first (-1 past top_k)
//           route_w: T x XK f32       their weights (0 past top_k)
//           exp_indptr: XE+1 i32      expert e's sorted rows are [exp_indptr[e], exp_indptr[e+1])
//           perm: R i32               sorted row -> token (-1 past the last)
//           sorted_w: R f32           sorted row -> its routing weight
//           pos: T x XK i32           (token, slot) -> sorted row (-1 for an unused slot)
//           gu_ptr: L x XE+1 i32      layer l's expert e owns gate/up tiles [gu_ptr[l, e], gu_ptr[l, e+1])
//           dn_ptr: L x XE+1 i32      ... and down tiles [dn_ptr[l, e], dn_ptr[l, e+1])
//           tile_expert: L x MAXGU i32  gate/up tile -> its expert (-1 past the last routed expert's))
//   sets (ACTX: L x XE   expert e's gate/up tiles, the wait count of its activations (0 unrouted),
//         DONE: L        the layer's down tiles)
//
// Routing is transformers' Qwen3MoeTopKRouter: softmax, the top_k most probable experts (ties to
// the lower index), their probabilities renormalized to sum to 1 when kCfgMoeNormTopk; in double,
// summed in the reference's order, so body and reference agree bit for bit on the same logits. A
// dense layer is one expert (0) that every token takes with weight 1. A routed expert gets
// ceil(inter / rows) gate/up tiles and ceil(H / rows) down tiles (moe_gate_up_rows, moe_down_rows).
//
// Why one task does it all: as separate tasks (a top-k per token, then a plan per layer) the two
// hand-offs and their dependent loads of global memory cost ~100 us a layer on Qwen3-30B-A3B at
// B = 1 (bench/README.md). Here every intermediate lives in the block's shared memory, the work
// is spread over the threads, and global memory is read once (the logits) and written in parallel.

#include <cmath>

#include "kernels/block_scratch.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

// Scratch of the routing, per token of a chunk: exps (double) and logits of every expert, and its
// top_k choices.
EVT_HD inline int64_t moe_route_token_bytes(int64_t experts, int64_t top_k) {
  return experts * (sizeof(double) + sizeof(float)) + top_k * sizeof(int32_t);
}
// The plan's three per-expert tables, ahead of the chunk region (16-byte aligned).
EVT_HD inline int64_t moe_plan_table_bytes(int64_t experts) { return (3 * 4 * (experts + 1) + 15) / 16 * 16; }
// The least scratch moe_plan_body works in: its tables and one token's routing (a chunk of rows
// needs 8 bytes a row, less than a token's routing).
EVT_HD inline int64_t moe_plan_scratch_bytes(int64_t experts, int64_t top_k) {
  return moe_plan_table_bytes(experts) + moe_route_token_bytes(experts, top_k);
}

// Routes tokens [0, tokens) from their logits (row t at logits + t * ld) into ids and w (slots
// per token), a chunk of tokens at a time in `region`.
template <class Block>
EVT_HD void moe_route_tokens(const Block& b, const float* logits, int64_t ld, int64_t tokens, int64_t experts,
                             int64_t top_k, bool norm_topk, int32_t* ids, float* w, int64_t slots,
                             unsigned char* region, int64_t region_bytes) {
  const int64_t chunk = region_bytes / moe_route_token_bytes(experts, top_k);
  for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
    const int64_t n = tokens - t0 < chunk ? tokens - t0 : chunk, cells = n * experts;
    double* ex = reinterpret_cast<double*>(region);  // exp(z - top), per (token, expert)
    float* z = reinterpret_cast<float*>(ex + cells);
    int32_t* chosen = reinterpret_cast<int32_t*>(z + cells);  // per token, top_k experts best first
    for (int64_t i = b.thread(); i < cells; i += b.threads()) z[i] = logits[(t0 + i / experts) * ld + i % experts];
    for (int64_t i = b.thread(); i < n * top_k; i += b.threads()) chosen[i] = -1;
    b.sync();
    // A (token, expert)'s rank is how many experts come before it: a larger logit, or an equal
    // one at a lower index (exp is monotonic, so this is the probabilities' order). The top_k
    // ranks are the choice. (A NaN logit only leaves a slot at -1: no index goes out of range.)
    for (int64_t i = b.thread(); i < cells; i += b.threads()) {
      const int64_t t = i / experts, e = i % experts;
      const float* zt = z + t * experts;
      const float v = zt[e];
      int64_t rank = 0;
      for (int64_t o = 0; o < experts; ++o) rank += zt[o] > v || (zt[o] == v && o < e);
      if (rank < top_k) chosen[t * top_k + rank] = static_cast<int32_t>(e);
    }
    b.sync();
    for (int64_t i = b.thread(); i < cells; i += b.threads()) {
      const int32_t best = chosen[i / experts * top_k];
      const double top = best < 0 ? 0.0 : static_cast<double>(z[i / experts * experts + best]);
      ex[i] = exp(static_cast<double>(z[i]) - top);
    }
    b.sync();
    for (int64_t t = b.thread(); t < n; t += b.threads()) {
      const double* et = ex + t * experts;
      const int32_t* ct = chosen + t * top_k;
      double sum = 0;  // in expert order, as the reference sums
      for (int64_t e = 0; e < experts; ++e) sum += et[e];
      double picked = 0;
      for (int64_t s = 0; s < top_k; ++s) picked += ct[s] < 0 ? 0.0 : et[ct[s]] / sum;
      for (int64_t s = 0; s < slots; ++s) {
        const int32_t e = s < top_k ? ct[s] : -1;
        const double p = e < 0 ? 0.0 : et[e] / sum;
        ids[(t0 + t) * slots + s] = e;
        w[(t0 + t) * slots + s] = static_cast<float>(e >= 0 && norm_topk ? p / picked : p);
      }
    }
    b.sync();  // the next chunk reuses the region
  }
}

template <class Block>
EVT_HD void moe_plan_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], tokens = reads[2].dim(0), hidden = reads[2].dim(1), slots = writes[0].dim(1);
  int32_t *ids = writes[0].as<int32_t>(), *indptr = writes[2].as<int32_t>(), *perm = writes[3].as<int32_t>();
  int32_t* pos = writes[5].as<int32_t>();
  float *route_w = writes[1].as<float>(), *sorted_w = writes[4].as<float>();
  const int64_t width = writes[6].dim(1), experts = width - 1, max_gu = writes[8].dim(1);
  int32_t *gu = writes[6].as<int32_t>() + l * width, *dn = writes[7].as<int32_t>() + l * width;
  int32_t* tile_expert = writes[8].as<int32_t>() + l * max_gu;
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t used = m.sparse() ? m.top_k : 1, rows = tokens * slots;
  const int64_t gu_rows = moe_gate_up_rows(cfg, m.sparse()), dn_rows = moe_down_rows(cfg, m.sparse());
  const int64_t gu_tiles = (m.inter + gu_rows - 1) / gu_rows, dn_tiles = (hidden + dn_rows - 1) / dn_rows;

  const Scratch s = b.scratch();
  int32_t* start = reinterpret_cast<int32_t*>(s.data);  // XE + 1: expert e's first sorted row
  int32_t* before = start + width;                      // XE + 1: routed experts before e
  int32_t* cursor = before + width;                     // XE: e's rows counted, then the next to place
  unsigned char* region = s.data + moe_plan_table_bytes(experts);
  const int64_t region_bytes = s.bytes - moe_plan_table_bytes(experts);

  // 1. Route.
  if (m.sparse()) {
    const DevBuffer& logits = reads[3];
    moe_route_tokens(b, logits.as<const float>(), logits.dim(1), tokens, m.experts, m.top_k,
                     cfg[kCfgMoeNormTopk] != 0, ids, route_w, slots, region, region_bytes);
  } else {
    for (int64_t r = b.thread(); r < rows; r += b.threads()) {
      ids[r] = r % slots == 0 ? 0 : -1;
      route_w[r] = r % slots == 0 ? 1.0f : 0.0f;
    }
    b.sync();
  }

  // 2. Count each expert's rows, a chunk of (token, slot) rows at a time (the routes are this
  // block's own writes, visible after its barrier). Each thread owns the same experts throughout.
  const int64_t chunk = region_bytes / 8;
  int32_t* row_e = reinterpret_cast<int32_t*>(region);  // (token, slot) -> expert, -1 unused
  float* row_w = reinterpret_cast<float*>(row_e + chunk);
  const auto stage = [&](int64_t r0) {
    const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
    for (int64_t i = b.thread(); i < n; i += b.threads()) {
      row_e[i] = (r0 + i) % slots < used ? ids[r0 + i] : -1;
      row_w[i] = route_w[r0 + i];
    }
    b.sync();
    return n;
  };
  for (int64_t e = b.thread(); e < experts; e += b.threads()) cursor[e] = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = stage(r0);
    for (int64_t e = b.thread(); e < experts; e += b.threads()) {
      int32_t c = 0;
      for (int64_t i = 0; i < n; ++i) c += row_e[i] == e;
      cursor[e] += c;
    }
    b.sync();
  }
  // 3. The prefix sums, in shared memory, then the tables and wait counts from them.
  if (b.thread() == 0) {
    int32_t rows_so_far = 0, routed_so_far = 0;
    for (int64_t e = 0; e < experts; ++e) {
      start[e] = rows_so_far;
      before[e] = routed_so_far;
      rows_so_far += cursor[e];
      routed_so_far += cursor[e] > 0;
    }
    start[experts] = rows_so_far;
    before[experts] = routed_so_far;
  }
  b.sync();
  for (int64_t e = b.thread(); e < width; e += b.threads()) {
    indptr[e] = start[e];
    gu[e] = static_cast<int32_t>(before[e] * gu_tiles);
    dn[e] = static_cast<int32_t>(before[e] * dn_tiles);
  }
  // Gate/up tile i is the (i / gu_tiles)-th routed expert's.
  for (int64_t i = b.thread(); i < max_gu; i += b.threads()) {
    tile_expert[i] = static_cast<int32_t>(moe_tile_expert(before, experts, i / gu_tiles));
  }
  // Under dynamic scheduling a zero count fires its element at once, which reads gu_ptr and
  // dn_ptr: all of them must be written first.
  b.sync();
  if (b.thread() == 0) b.set_wait_count(1, l, before[experts] * dn_tiles);
  for (int64_t e = b.thread(); e < experts; e += b.threads()) {
    b.set_wait_count(0, l * experts + e, start[e + 1] > start[e] ? gu_tiles : 0);
    cursor[e] = start[e];
  }
  // 4. Place the rows, each expert's in (token, slot) order. One chunk of rows is still staged.
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = rows <= chunk ? rows : stage(r0);
    for (int64_t e = b.thread(); e < experts; e += b.threads()) {
      int32_t p = cursor[e];
      for (int64_t i = 0; i < n; ++i) {
        if (row_e[i] != e) continue;
        perm[p] = static_cast<int32_t>((r0 + i) / slots);
        sorted_w[p] = row_w[i];
        pos[r0 + i] = p++;
      }
      cursor[e] = p;
    }
    b.sync();
  }
  const int32_t total = start[experts];
  for (int64_t r = b.thread(); r < rows; r += b.threads()) {
    if (r % slots >= used || ids[r] < 0) pos[r] = -1;
    if (r >= total) {
      perm[r] = -1;
      sorted_w[r] = 0;
    }
  }
}

}  // namespace evt::kernels::llm
