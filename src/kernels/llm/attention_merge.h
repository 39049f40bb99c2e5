#pragma once
// Merges the KV splits of one token's attention: each split's normalized output weighs
// sum_s * exp(max_s - max), as in flash-decoding. Tile (l, t) merges every query head of token t:
// the decode graph runs it inline, on the SM whose attention split completes the token, so one
// task per token rather than one per head (which would run one after another there).
//   reads (o_part: KVS x T x HQ x D f32, ml: KVS x T x HQ x 2 f32), writes (attn: T x HQ D f32)

#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// The scratch the body uses: each warp's split weights.
EVT_HD constexpr int64_t attention_merge_scratch_bytes(int64_t splits, int warps) { return splits * warps * 4; }

// Warp w merges heads w, w + W, ...: its lanes find the splits' common max and weights (kept in
// scratch), then each lane adds up the splits for its dims. Sums run over the splits in order.
template <class Block>
EVT_HD void attention_merge_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const auto t = static_cast<int32_t>(tile[1]);
  const auto splits = static_cast<int32_t>(reads[0].dim(0)), tokens = static_cast<int32_t>(reads[0].dim(1));
  const auto heads = static_cast<int32_t>(reads[0].dim(2)), d = static_cast<int32_t>(reads[0].dim(3));
  constexpr int kMaxPer = 4;  // a lane's dims in flight together (all of a 128-dim head's)
  constexpr int kBatch = 8;   // splits whose loads are in flight together
  const float* o = reads[0].as<const float>();
  const float* ml = reads[1].as<const float>();
  float* weight = reinterpret_cast<float*>(b.scratch().data) + warp(b) * splits;
  for (int32_t hq = warp(b); hq < heads; hq += warps(b)) {
    const auto state = [&](int32_t s) { return ml + ((static_cast<int64_t>(s) * tokens + t) * heads + hq) * 2; };
    float max = -INFINITY;
    for (int32_t s = lane(b); s < splits; s += lanes()) max = fmaxf(max, state(s)[0]);
    max = warp_max(max);
    float den = 0;
    for (int32_t s = lane(b); s < splits; s += lanes()) {
      // An empty split (sum 0) weighs nothing: its output is not a number to weigh.
      const float w = state(s)[1] == 0 ? 0.0f : state(s)[1] * softmax_rescale(state(s)[0], max);
      weight[s] = w;
      den += w;
    }
    den = warp_sum(den);
    warp_sync();
    // Each lane adds up its dims (lane, lane + 32, ...; kMaxPer at a time) over the splits, kBatch
    // splits at a time with every load of a batch issued before the first sum: o_part sits in L2
    // (other SMs wrote it), and one split after the other would pay its latency splits x dims times.
    const float* head_o = o + (static_cast<int64_t>(t) * heads + hq) * d;
    float* out = writes[0].as<float>() + (static_cast<int64_t>(t) * heads + hq) * d;
    const int64_t split_stride = static_cast<int64_t>(tokens) * heads * d;
    for (int32_t i0 = lane(b); i0 < d; i0 += lanes() * kMaxPer) {
      float num[kMaxPer] = {};
      for (int32_t s0 = 0; s0 < splits; s0 += kBatch) {
        float v[kBatch][kMaxPer];
        EVT_UNROLL
        for (int u = 0; u < kBatch; ++u) {
          EVT_UNROLL
          for (int j = 0; j < kMaxPer; ++j) {
            const int32_t i = i0 + j * lanes();
            v[u][j] = s0 + u < splits && i < d ? head_o[(s0 + u) * split_stride + i] : 0.0f;
          }
        }
        EVT_UNROLL
        for (int u = 0; u < kBatch; ++u) {
          const float w = s0 + u < splits ? weight[s0 + u] : 0.0f;
          EVT_UNROLL
          for (int j = 0; j < kMaxPer; ++j) num[j] += w != 0 ? w * v[u][j] : 0.0f;  // an empty split's v may be NaN
        }
      }
      EVT_UNROLL
      for (int j = 0; j < kMaxPer; ++j) {
        const int32_t i = i0 + j * lanes();
        if (i < d) out[i] = den > 0 ? num[j] / den : 0.0f;
      }
    }
    warp_sync();  // every lane read the weights before the next head's are written
  }
}

}  // namespace evt::kernels::llm
