// A small MoE-style routed graph (seed 001, "data-dependent dynamism"), sized by its buffers:
// B tokens of width H, X experts, top-K routing, expert tiles of M rows.
//   moe_route   (B,)  logits = x[i] @ wr; topk[i, :] = the K best experts, topw = their softmax
//   moe_count   (1,)  per-expert token counts -> indptr (tile offsets), pos, tile_tokens, and the
//                     run-time wait counts of the per-expert event (its `sets`)
//   moe_gather  (B,)  xs[pos[i, k]] = x[i]; notifies the experts topk[i, :]
//   moe_expert  (tiles,) ys[t] = xs[t] @ we[e] for tile t of expert e, released
//                     by the range trigger [indptr[e], indptr[e+1])
//   moe_combine (B,)  out[i] = sum_k topw[i, k] * ys[pos[i, k]]

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/registry.h"

namespace evt::kernels {
namespace {

// reads (x: B x H, wr: H x X), writes (topk: B x K i32, topw: B x K f32).
void moe_route(const TileArgs& args) {
  const BufferView &x = args.reads[0], &wr = args.reads[1];
  const BufferView &topk = args.writes[0], &topw = args.writes[1];
  const int64_t h = x.dim(1), experts = wr.dim(1), k = topk.dim(1), i = args.tile[0];
  std::vector<float> logits(experts, 0.0f);
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t c = 0; c < h; ++c) logits[e] += x.as<const float>()[i * h + c] * wr.as<const float>()[c * experts + e];
  }
  std::vector<int32_t> order(experts);
  for (int32_t e = 0; e < experts; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  float denom = 0;
  for (int64_t s = 0; s < k; ++s) denom += std::exp(logits[order[s]] - logits[order[0]]);
  for (int64_t s = 0; s < k; ++s) {
    topk.as<int32_t>()[i * k + s] = order[s];
    topw.as<float>()[i * k + s] = std::exp(logits[order[s]] - logits[order[0]]) / denom;
  }
}

// reads (topk: B x K), writes (indptr: X+1, pos: B x K, tile_tokens: tiles x M); sets the
// per-expert event's wait counts to the number of tokens routed to each expert.
void moe_count(const TileArgs& args) {
  const BufferView& topk = args.reads[0];
  const BufferView &indptr = args.writes[0], &pos = args.writes[1], &tile_tokens = args.writes[2];
  const int64_t tokens = topk.dim(0), k = topk.dim(1), experts = indptr.dim(0) - 1, m = tile_tokens.dim(1);
  std::vector<int64_t> count(experts, 0);
  for (int64_t r = 0; r < tokens * k; ++r) ++count[topk.as<const int32_t>()[r]];
  indptr.as<int32_t>()[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    indptr.as<int32_t>()[e + 1] = static_cast<int32_t>(indptr.as<int32_t>()[e] + (count[e] + m - 1) / m);
    args.wait_counts->set_wait_count(0, e, count[e]);
  }
  std::fill_n(tile_tokens.as<int32_t>(), tile_tokens.numel, -1);
  std::vector<int64_t> fill(experts, 0);
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t s = 0; s < k; ++s) {
      const int32_t e = topk.as<const int32_t>()[i * k + s];
      const int64_t row = indptr.as<int32_t>()[e] * m + fill[e]++;
      pos.as<int32_t>()[i * k + s] = static_cast<int32_t>(row);
      tile_tokens.as<int32_t>()[row] = static_cast<int32_t>(i);
    }
  }
}

// reads (x: B x H, pos: B x K), writes (xs: tiles x M x H).
void moe_gather(const TileArgs& args) {
  const BufferView &x = args.reads[0], &pos = args.reads[1];
  const BufferView& xs = args.writes[0];
  const int64_t h = x.dim(1), k = pos.dim(1), i = args.tile[0];
  for (int64_t s = 0; s < k; ++s) {
    const int64_t row = pos.as<const int32_t>()[i * k + s];
    std::copy_n(x.as<const float>() + i * h, h, xs.as<float>() + row * h);
  }
}

// reads (xs: tiles x M x H, we: X x H x H, indptr: X+1, tile_tokens: tiles x M), writes (ys).
void moe_expert(const TileArgs& args) {
  const BufferView &xs = args.reads[0], &we = args.reads[1], &indptr = args.reads[2], &tile_tokens = args.reads[3];
  const BufferView& ys = args.writes[0];
  const int64_t m = xs.dim(1), h = xs.dim(2), experts = indptr.dim(0) - 1, t = args.tile[0];
  const int32_t* ip = indptr.as<const int32_t>();
  const int64_t e = std::upper_bound(ip, ip + experts + 1, t) - ip - 1;
  const float* w = we.as<const float>() + e * h * h;
  for (int64_t r = 0; r < m; ++r) {
    const int64_t row = t * m + r;
    float* y = ys.as<float>() + row * h;
    if (tile_tokens.as<const int32_t>()[row] < 0) {  // padding row of the expert's last tile
      std::fill_n(y, h, 0.0f);
      continue;
    }
    const float* xr = xs.as<const float>() + row * h;
    for (int64_t c = 0; c < h; ++c) {
      float acc = 0;
      for (int64_t d = 0; d < h; ++d) acc += xr[d] * w[d * h + c];
      y[c] = acc;
    }
  }
}

// reads (ys: tiles x M x H, topw: B x K, pos: B x K), writes (out: B x H).
void moe_combine(const TileArgs& args) {
  const BufferView &ys = args.reads[0], &topw = args.reads[1], &pos = args.reads[2];
  const BufferView& out = args.writes[0];
  const int64_t h = out.dim(1), k = topw.dim(1), i = args.tile[0];
  float* o = out.as<float>() + i * h;
  std::fill_n(o, h, 0.0f);
  for (int64_t s = 0; s < k; ++s) {
    const float w = topw.as<const float>()[i * k + s];
    const float* y = ys.as<const float>() + pos.as<const int32_t>()[i * k + s] * h;
    for (int64_t c = 0; c < h; ++c) o[c] += w * y[c];
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(moe_route, TileFunction{
    .name = "moe_route", .summary = "router logits and softmax top-k for one token",
    .num_reads = 2, .num_writes = 2, .cpu = moe_route, .relative_cost = 1});
EVT_REGISTER_TILE_FUNCTION(moe_count, TileFunction{
    .name = "moe_count", .summary = "per-expert counts, tile offsets and row placement; sets expert wait counts",
    .num_reads = 1, .num_writes = 3, .cpu = moe_count, .relative_cost = 4});
EVT_REGISTER_TILE_FUNCTION(moe_gather, TileFunction{
    .name = "moe_gather", .summary = "copies a token's row to its expert-sorted positions",
    .num_reads = 2, .num_writes = 1, .cpu = moe_gather, .relative_cost = 0.5});
EVT_REGISTER_TILE_FUNCTION(moe_expert, TileFunction{
    .name = "moe_expert", .summary = "one expert's GEMM over a tile of its routed rows",
    .num_reads = 4, .num_writes = 1, .cpu = moe_expert, .relative_cost = 4});
EVT_REGISTER_TILE_FUNCTION(moe_combine, TileFunction{
    .name = "moe_combine", .summary = "weighted sum of a token's expert outputs",
    .num_reads = 3, .num_writes = 1, .cpu = moe_combine, .relative_cost = 1});

}  // namespace evt::kernels
