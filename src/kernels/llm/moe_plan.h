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
//           tile_expert: L x MAXGU x 3 i32  gate/up tile -> its expert and the expert's sorted rows
//                                    (first, count), moe_layout.h's MoeTileEntry (-1 past the last
//                                    routed expert's))
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
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// The plan's scratch: three per-expert tables, then (8-byte aligned) each warp's routing of one
// token (the logits and exps of every expert, its top_k picks), then a chunk of (token, slot) rows.
EVT_HD inline int64_t moe_plan_table_bytes(int64_t experts) { return (3 * 4 * (experts + 1) + 15) / 16 * 16; }
EVT_HD inline int64_t moe_route_warp_bytes(int64_t experts, int64_t top_k) {
  return (experts * (sizeof(double) + sizeof(float)) + top_k * sizeof(int32_t) + 15) / 16 * 16;
}
// The least scratch moe_plan_body works in, for blocks of `warps` warps: its tables, the warps'
// routing and a chunk of one row (8 bytes).
EVT_HD inline int64_t moe_plan_scratch_bytes(int64_t experts, int64_t top_k, int64_t warps) {
  return moe_plan_table_bytes(experts) + warps * moe_route_warp_bytes(experts, top_k) + 8;
}

// A logit's place in the routing order: order_key, except that NaN has 0, below every logit's,
// so that it is never picked.
EVT_HD inline uint32_t route_key(float v) { return v == v ? order_key(v) : 0; }

// Routes tokens [0, tokens) from their logits (row t at logits + t * ld) into ids and w (slots
// per token), a token per warp at a time in `warp_scratch` (moe_route_warp_bytes each). When
// row_e is not null, it and row_w get each (token, slot) row's expert and weight too.
//
// A lane holds the keys of its experts (lane + lanes() j) in registers. Each of the top_k rounds
// takes the warp's largest key not taken yet (one redux), and of the lanes that hold it the lowest
// expert (another): the reference's order of the probabilities (exp is monotonic) with ties to
// the lower index. NaN logits are never picked; a slot with nothing left to pick gets expert -1.
// The weights are the picks' exp(z - top) over their sum in pick order (over every expert's in
// expert order without kCfgMoeNormTopk), in double: softmax and renormalization in one division,
// as ref_route computes them, so that body and reference agree bit for bit.
template <class Block>
EVT_HD void moe_route_tokens(const Block& b, const float* logits, int64_t ld, int64_t tokens, int64_t experts,
                             int64_t top_k, bool norm_topk, int32_t* ids, float* w, int64_t slots,
                             unsigned char* warp_scratch, int32_t* row_e, float* row_w) {
  constexpr int kLaneExperts = static_cast<int>(kMaxMoeExperts) / lanes();
  double* ex = reinterpret_cast<double*>(warp_scratch + warp(b) * moe_route_warp_bytes(experts, top_k));
  float* z = reinterpret_cast<float*>(ex + experts);
  int32_t* pick = reinterpret_cast<int32_t*>(z + experts);
  for (int64_t t = warp(b); t < tokens; t += warps(b)) {
    // Every load is issued before any is used: a lane past the last expert loads the last one's
    // logit and keys it 0, rather than branching around the load.
    float u[kLaneExperts];
    EVT_UNROLL
    for (int j = 0; j < kLaneExperts; ++j) u[j] = logits[t * ld + min_of<int64_t>(lane(b) + lanes() * j, experts - 1)];
    uint32_t key[kLaneExperts];
    EVT_UNROLL
    for (int j = 0; j < kLaneExperts; ++j) {
      const int64_t e = lane(b) + lanes() * j;
      key[j] = e < experts ? route_key(u[j]) : 0;
      if (e < experts) z[e] = u[j];
    }
    int64_t picked = 0;
    EVT_NO_UNROLL
    for (; picked < top_k; ++picked) {
      uint32_t best = 0;  // this lane's largest key left, at its first j
      int jb = 0;
      EVT_UNROLL
      for (int j = 0; j < kLaneExperts; ++j) {
        if (key[j] > best) best = key[j], jb = j;
      }
      const uint32_t top_key = warp_max(best);
      if (top_key == 0) break;  // nothing left but NaN: the remaining slots stay empty
      const int32_t mine = best == top_key ? static_cast<int32_t>(lane(b) + lanes() * jb) : INT32_MAX;
      const int32_t e = warp_min(mine);
      if (mine == e) {
        EVT_UNROLL
        for (int j = 0; j < kLaneExperts; ++j) key[j] = j == jb ? 0 : key[j];
      }
      if (lane(b) == 0) pick[picked] = e;
    }
    warp_sync();
    // The exps the weights divide, then their sum, by every lane in the same order.
    const double top = picked == 0 ? 0.0 : static_cast<double>(z[pick[0]]);
    const int64_t terms = norm_topk ? picked : experts;
    EVT_NO_UNROLL
    for (int64_t i = lane(b); i < terms; i += lanes()) ex[i] = exp(static_cast<double>(z[norm_topk ? pick[i] : i]) - top);
    warp_sync();
    double sum = 0;
    for (int64_t i = 0; i < terms; ++i) sum += ex[i];
    EVT_NO_UNROLL
    for (int64_t s = lane(b); s < slots; s += lanes()) {
      const int32_t e = s < picked ? pick[s] : -1;
      const float weight = e < 0 ? 0.0f : static_cast<float>(ex[norm_topk ? s : e] / sum);
      ids[t * slots + s] = e;
      w[t * slots + s] = weight;
      if (row_e != nullptr) {
        row_e[t * slots + s] = e;
        row_w[t * slots + s] = weight;
      }
    }
    warp_sync();  // the warp's next token reuses z, ex and pick
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
  int32_t* tile_expert = writes[8].as<int32_t>() + l * max_gu * kTileEntryWords;
  const LayerMlp m = layer_mlp(cfg, reads[1].as<const int64_t>(), l, hidden);
  const int64_t rows = tokens * slots;  // a slot past top_k (past 1 in a dense layer) routes to -1
  const int64_t gu_tiles = moe_gate_up_tiles(cfg, m), dn_tiles = moe_down_tiles(cfg, m, hidden);

  const Scratch s = b.scratch();
  int32_t* start = reinterpret_cast<int32_t*>(s.data);  // XE + 1: expert e's first sorted row
  int32_t* before = start + width;                      // XE + 1: routed experts before e
  int32_t* cursor = before + width;                     // XE: e's rows counted, then the next to place
  unsigned char* warp_scratch = s.data + moe_plan_table_bytes(experts);
  const int64_t route_bytes = m.sparse() ? warps(b) * moe_route_warp_bytes(m.experts, m.top_k) : 0;
  const int64_t chunk = (s.bytes - moe_plan_table_bytes(experts) - route_bytes) / 8;
  int32_t* row_e = reinterpret_cast<int32_t*>(warp_scratch + route_bytes);  // (token, slot) -> expert, -1 unused
  float* row_w = reinterpret_cast<float*>(row_e + chunk);
  const bool one_chunk = rows <= chunk;  // then the routing leaves the rows staged

  // 1. Route.
  for (int64_t e = b.thread(); e < experts; e += b.threads()) cursor[e] = 0;
  if (m.sparse()) {
    const DevBuffer& logits = reads[3];
    moe_route_tokens(b, logits.as<const float>(), logits.dim(1), tokens, m.experts, m.top_k,
                     cfg[kCfgMoeNormTopk] != 0, ids, route_w, slots, warp_scratch, one_chunk ? row_e : nullptr,
                     row_w);
  } else {
    for (int64_t r = b.thread(); r < rows; r += b.threads()) {
      ids[r] = r % slots == 0 ? 0 : -1;
      route_w[r] = r % slots == 0 ? 1.0f : 0.0f;
      if (one_chunk) {
        row_e[r] = ids[r];
        row_w[r] = route_w[r];
      }
    }
  }
  b.sync();

  // 2. Count each expert's rows, a chunk of (token, slot) rows at a time (the routes are this
  // block's own writes, visible after its barrier).
  const auto stage = [&](int64_t r0) {
    const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
    if (one_chunk) return n;
    for (int64_t i = b.thread(); i < n; i += b.threads()) {
      row_e[i] = ids[r0 + i];
      row_w[i] = route_w[r0 + i];
    }
    b.sync();
    return n;
  };
  // A shared-memory add per row: the order rows are counted in does not matter.
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = stage(r0);
    for (int64_t i = b.thread(); i < n; i += b.threads()) {
      if (row_e[i] >= 0) shared_add(&cursor[row_e[i]], 1);
    }
    b.sync();
  }
  // 3. The prefix sums and the range tables (warp 0: each lane a run of experts); each expert's
  // cursor becomes its first sorted row.
  if (warp(b) == 0) {
    const int64_t per = (experts + lanes() - 1) / lanes(), e0 = lane(b) * per, e1 = e0 + per < experts ? e0 + per : experts;
    uint64_t mine = 0;  // rows << 32 | routed experts, of this lane's run
    for (int64_t e = e0; e < e1; ++e) mine += (uint64_t{static_cast<uint32_t>(cursor[e])} << 32) + (cursor[e] > 0);
    const LaneSums sums = warp_lane_sums(mine, lane(b));
    const auto put = [&](int64_t e, uint64_t rows_experts) {
      start[e] = indptr[e] = static_cast<int32_t>(rows_experts >> 32);
      before[e] = static_cast<int32_t>(rows_experts & 0xffffffffu);
      gu[e] = static_cast<int32_t>(before[e] * gu_tiles);
      dn[e] = static_cast<int32_t>(before[e] * dn_tiles);
    };
    uint64_t so_far = sums.below;
    for (int64_t e = e0; e < e1; ++e) {
      const int32_t count = cursor[e];
      put(e, so_far);
      cursor[e] = start[e];
      so_far += (uint64_t{static_cast<uint32_t>(count)} << 32) + (count > 0);
    }
    if (lane(b) == 0) put(experts, sums.total);
  }
  b.sync();
  // With every row staged (one chunk), warp 0 places the rows (step 5) while the other warps do
  // steps 4 and 6, which read only the tables above: one phase where there were three (2.1 us of
  // the plan's 6.7 on its own at one token of Qwen3-30B-A3B, bench/micro/moe_plan_micro.cu).
  // Otherwise every thread does step 4, then stages each chunk of rows for warp 0 to place.
  const bool split = one_chunk && warps(b) > 1;
  const bool helps = !split || warp(b) > 0;  // a thread of steps 4 and 6
  const int64_t me = split ? b.thread() - lanes() : b.thread(), team = split ? b.threads() - lanes() : b.threads();
  // 4. The wait counts, then the tile table. Under dynamic scheduling a zero count fires its
  // element at once, which reads gu_ptr and dn_ptr: the block barrier above ordered them first.
  // Each count is stored after a release fence, which waits for the thread's stores before it,
  // and the tile table's need not be among them (its readers wait for the plan's notification,
  // not for a count).
  if (helps) {
    if (me == 0) b.set_wait_count(1, l, before[experts] * dn_tiles);
    for (int64_t e = me; e < experts; e += team) b.set_wait_count(0, l * experts + e, start[e + 1] > start[e] ? gu_tiles : 0);
    // Gate/up tile i is the (i / gu_tiles)-th routed expert's: its entry names the expert and its rows.
    for (int64_t i = me; i < max_gu; i += team) {
      put_moe_tile_entry(tile_expert, i, static_cast<int32_t>(moe_tile_expert(before, experts, i / gu_tiles)), start);
    }
  }
  if (!split) b.sync();
  // 5. Place the rows, each expert's in (token, slot) order. Warp 0 walks them 32 at a time: the
  // lanes holding one expert find each other (match.any), the lowest of them takes that many places
  // from the expert's cursor, and each lane takes the place of its rank among them. (A warp per
  // expert scanning every row took 2.9 us of the plan's 12.9 at one token of Qwen3-30B-A3B: 128
  // experts over 11 warps.) Unused slots get no row.
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = stage(r0);
    if (warp(b) == 0) {
      for (int64_t i0 = 0; i0 < n; i0 += lanes()) {
        const int64_t i = i0 + lane(b);
        const int32_t e = i < n ? row_e[i] : -1;
        const uint32_t same = warp_match(e), below = same & ((1u << lane(b)) - 1);
        const int first = bit_count((same & (0u - same)) - 1);  // the lowest lane of the match
        int32_t at = 0;
        if (below == 0 && e >= 0) {
          at = cursor[e];
          cursor[e] = at + bit_count(same);
        }
        at = warp_broadcast(at, first) + bit_count(below);
        if (e >= 0) {
          perm[at] = static_cast<int32_t>((r0 + i) / slots);
          sorted_w[at] = row_w[i];
          pos[r0 + i] = at;
        } else if (i < n) {
          pos[r0 + i] = -1;
        }
        warp_sync();  // the next 32 rows read the cursors these lanes moved
      }
    }
    if (!split) b.sync();
  }
  // 6. No sorted rows past the last routed one.
  if (helps) {
    for (int64_t r = start[experts] + me; r < rows; r += team) {
      perm[r] = -1;
      sorted_w[r] = 0;
    }
  }
}

}  // namespace evt::kernels::llm
