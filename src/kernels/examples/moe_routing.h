#pragma once
// A small MoE-style routed graph (seed 001, "data-dependent dynamism"), sized by its buffers:
// B tokens of width H, X <= kMoeMaxExperts experts, top-K routing, expert tiles of M rows.
//   moe_route   (B,)     logits = x[i] @ wr; topk[i, :] = the K best experts (ties: lower index);
//                        topw[i, s] = (K - s) / (K (K + 1) / 2), exact in every backend
//   moe_count   (1,)     per-expert token counts -> indptr (tile offsets), pos, tile_tokens, and
//                        the run-time wait counts of the per-expert event (its `sets`)
//   moe_gather  (B,)     xs[pos[i, k]] = x[i]; notifies the experts topk[i, :]
//   moe_expert  (tiles,) ys[t] = xs[t] @ we[e] for tile t of expert e, released by the range
//                        trigger [indptr[e], indptr[e+1])
//   moe_combine (B,)     out[i] = sum_k topw[i, k] * ys[pos[i, k]]

#include "kernels/tile_body.h"

namespace evt::kernels {

constexpr int64_t kMoeMaxExperts = 64;

// reads (x: B x H, wr: H x X), writes (topk: B x K i32, topw: B x K f32). One thread per token.
template <class Block>
EVT_HD void moe_route_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  if (b.thread() != 0) return;
  const DevBuffer &x = reads[0], &wr = reads[1], &topk = writes[0], &topw = writes[1];
  const int64_t h = x.dim(1), experts = min_of(wr.dim(1), kMoeMaxExperts), k = topk.dim(1), i = tile[0];
  float logits[kMoeMaxExperts];
  bool taken[kMoeMaxExperts];
  for (int64_t e = 0; e < experts; ++e) {
    float acc = 0;
    for (int64_t c = 0; c < h; ++c) acc = add_product(acc, x.as<const float>()[i * h + c], wr.as<const float>()[c * experts + e]);
    logits[e] = acc;
    taken[e] = false;
  }
  const float weight_sum = static_cast<float>(k * (k + 1) / 2);
  for (int64_t s = 0; s < k; ++s) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      if (!taken[e] && (best < 0 || logits[e] > logits[best])) best = e;
    }
    taken[best] = true;
    topk.as<int32_t>()[i * k + s] = static_cast<int32_t>(best);
    topw.as<float>()[i * k + s] = static_cast<float>(k - s) / weight_sum;
  }
}

// reads (topk: B x K), writes (indptr: X+1, pos: B x K, tile_tokens: tiles x M); sets the
// per-expert event's wait counts to the number of tokens routed to each expert. Serial.
template <class Block>
EVT_HD void moe_count_body(const Block& b, const int64_t*, const DevBuffer* reads, const DevBuffer* writes) {
  if (b.thread() != 0) return;
  const DevBuffer& topk = reads[0];
  const DevBuffer &indptr = writes[0], &pos = writes[1], &tile_tokens = writes[2];
  const int64_t tokens = topk.dim(0), k = topk.dim(1), m = tile_tokens.dim(1);
  const int64_t experts = min_of(indptr.dim(0) - 1, kMoeMaxExperts);
  int64_t count[kMoeMaxExperts] = {}, fill[kMoeMaxExperts] = {};
  for (int64_t r = 0; r < tokens * k; ++r) ++count[topk.as<const int32_t>()[r]];
  int32_t* ip = indptr.as<int32_t>();
  ip[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    ip[e + 1] = static_cast<int32_t>(ip[e] + (count[e] + m - 1) / m);
    b.set_wait_count(0, e, count[e]);
  }
  for (int64_t r = 0; r < tile_tokens.numel; ++r) tile_tokens.as<int32_t>()[r] = -1;
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t s = 0; s < k; ++s) {
      const int32_t e = topk.as<const int32_t>()[i * k + s];
      const int64_t row = ip[e] * m + fill[e]++;
      pos.as<int32_t>()[i * k + s] = static_cast<int32_t>(row);
      tile_tokens.as<int32_t>()[row] = static_cast<int32_t>(i);
    }
  }
}

// reads (x: B x H, pos: B x K), writes (xs: tiles x M x H).
template <class Block>
EVT_HD void moe_gather_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const DevBuffer &x = reads[0], &pos = reads[1], &xs = writes[0];
  const int64_t h = x.dim(1), k = pos.dim(1), i = tile[0];
  for (int64_t s = 0; s < k; ++s) {
    const int64_t row = pos.as<const int32_t>()[i * k + s];
    for (int64_t c = b.thread(); c < h; c += b.threads()) xs.as<float>()[row * h + c] = x.as<const float>()[i * h + c];
  }
}

// reads (xs: tiles x M x H, we: X x H x H, indptr: X+1, tile_tokens: tiles x M), writes (ys).
template <class Block>
EVT_HD void moe_expert_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const DevBuffer &xs = reads[0], &we = reads[1], &indptr = reads[2], &tile_tokens = reads[3], &ys = writes[0];
  const int64_t m = xs.dim(1), h = xs.dim(2), experts = indptr.dim(0) - 1, t = tile[0];
  int64_t e = 0;  // the expert whose tile range holds t
  while (e + 1 < experts && indptr.as<const int32_t>()[e + 1] <= t) ++e;
  const float* w = we.as<const float>() + e * h * h;
  for (int64_t r = 0; r < m; ++r) {
    const int64_t row = t * m + r;
    const bool padding = tile_tokens.as<const int32_t>()[row] < 0;  // the expert's last tile
    const float* xr = xs.as<const float>() + row * h;
    for (int64_t c = b.thread(); c < h; c += b.threads()) {
      float acc = 0;
      if (!padding) {
        for (int64_t d = 0; d < h; ++d) acc = add_product(acc, xr[d], w[d * h + c]);
      }
      ys.as<float>()[row * h + c] = acc;
    }
  }
}

// reads (ys: tiles x M x H, topw: B x K, pos: B x K), writes (out: B x H).
template <class Block>
EVT_HD void moe_combine_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const DevBuffer &ys = reads[0], &topw = reads[1], &pos = reads[2], &out = writes[0];
  const int64_t h = out.dim(1), k = topw.dim(1), i = tile[0];
  for (int64_t c = b.thread(); c < h; c += b.threads()) {
    float acc = 0;
    for (int64_t s = 0; s < k; ++s) {
      acc = add_product(acc, topw.as<const float>()[i * k + s], ys.as<const float>()[pos.as<const int32_t>()[i * k + s] * h + c]);
    }
    out.as<float>()[i * h + c] = acc;
  }
}

}  // namespace evt::kernels
