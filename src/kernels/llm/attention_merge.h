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
    for (int32_t i = lane(b); i < d; i += lanes()) {
      float num = 0;
      for (int32_t s = 0; s < splits; ++s) {
        if (weight[s] != 0) num += weight[s] * o[((static_cast<int64_t>(s) * tokens + t) * heads + hq) * d + i];
      }
      writes[0].as<float>()[(static_cast<int64_t>(t) * heads + hq) * d + i] = den > 0 ? num / den : 0.0f;
    }
    warp_sync();  // every lane read the weights before the next head's are written
  }
}

}  // namespace evt::kernels::llm
