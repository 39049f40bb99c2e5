#pragma once
// Merges the KV splits of one token's attention for the query heads of one KV head: each split's
// normalized output weighs sum_s * exp(max_s - max), as in flash-decoding. Tile (l, t, h) merges
// query heads [h G, (h + 1) G) of token t (G = HQ / HKV, GQA's group): the decode graph runs it
// inline, on the SM whose attention split completes that KV head, so a token's HKV merges run on
// as many SMs at once. (One task per token, reading every head's splits from one SM, took 17 us
// of work a layer for Qwen3-8B at B = 1 on an H200; a KV head's takes 7.6, on 8 SMs at once.)
// attn is stored in bf16, as o_proj stages it: the tiles that read it read half the bytes. With
// one split attention wrote attn itself and the tile does nothing: it still runs, as the graph is
// the same for every step, but it no longer reads the split back and rewrites it. Only then is
// its tile dim 1 a run of tokens rather than token t (decode_config.h's attention_run_stride).
//   reads (cfg, o_part: KVS x T x HQ x D f32, ml: KVS x T x HQ x 2 f32), writes (attn: T x HQ D bf16)

#include "kernels/llm/decode_attention.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// The scratch the body uses: each head's split weights and their sum.
EVT_HD constexpr int64_t attention_merge_scratch_bytes(int64_t splits) { return (splits + 1) * kMaxGroup * 4; }

// The splits whose outputs a thread of the merge loads at once: more take another round trip.
inline constexpr int kMergeSplitsAtOnce = 8;

// Warp g finds head g's common max and split weights (kept in scratch); then every thread adds
// up one (head, dim) over the splits, kBatch splits' loads in flight at a time (o_part sits in
// L2, written by other SMs). Sums run over the splits in order. A load past the last split reads
// the last one again (its weight is 0) rather than waiting behind a condition: ptxas issues a
// predicated load only once the one before it has been used, so conditional loads go one round
// trip at a time.
template <class Block>
EVT_HD void attention_merge_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const auto t = static_cast<int32_t>(tile[1]), h = static_cast<int32_t>(tile[2]);
  const auto splits = static_cast<int32_t>(reads[1].dim(0)), tokens = static_cast<int32_t>(reads[1].dim(1));
  if (splits == 1) return;
  const auto heads = static_cast<int32_t>(reads[1].dim(2)), d = static_cast<int32_t>(reads[1].dim(3));
  const int32_t group = heads / cfg[kCfgKvHeads], first = h * group;
  constexpr int kBatch = kMergeSplitsAtOnce;
  const float* o = reads[1].as<const float>();
  const float* ml = reads[2].as<const float>();
  float* weight = reinterpret_cast<float*>(b.scratch().data);  // [head][split]: attention_merge_scratch_bytes
  float* den = weight + kMaxGroup * splits;                       // [head]
  for (int32_t g = warp(b); g < group; g += warps(b)) {
    const int32_t hq = first + g;
    const auto state = [&](int32_t s) { return ml + ((static_cast<int64_t>(s) * tokens + t) * heads + hq) * 2; };
    float max = -INFINITY;
    for (int32_t s = lane(b); s < splits; s += lanes()) max = fmaxf(max, state(s)[0]);
    max = warp_max(max);
    float sum = 0;
    for (int32_t s = lane(b); s < splits; s += lanes()) {
      // An empty split (sum 0) weighs nothing: its output is not a number to weigh.
      const float w = state(s)[1] == 0 ? 0.0f : state(s)[1] * softmax_rescale(state(s)[0], max);
      weight[g * splits + s] = w;
      sum += w;
    }
    sum = warp_sum(sum);
    if (lane(b) == 0) den[g] = sum;
  }
  b.sync();
  const int64_t split_stride = static_cast<int64_t>(tokens) * heads * d;
  for (int32_t i = b.thread(); i < group * d; i += b.threads()) {
    const int32_t g = i / d;
    const int64_t at = (static_cast<int64_t>(t) * heads + first + g) * d + i % d;
    float num = 0;
    for (int32_t s0 = 0; s0 < splits; s0 += kBatch) {
      float v[kBatch];
      EVT_UNROLL
      for (int u = 0; u < kBatch; ++u) v[u] = o[min_of(s0 + u, splits - 1) * split_stride + at];
      EVT_UNROLL
      for (int u = 0; u < kBatch; ++u) {
        const float w = s0 + u < splits ? weight[g * splits + s0 + u] : 0.0f;
        num += w != 0 ? w * v[u] : 0.0f;  // an empty split's v may be NaN
      }
    }
    writes[0].as<uint16_t>()[at] = f32_to_bf16(den[g] > 0 ? num / den[g] : 0.0f);
  }
  b.sync();  // the next task of this block reuses the scratch
}

}  // namespace evt::kernels::llm
