#pragma once
// Merges the KV splits of one token's attention: each split's normalized output weighs
// sum_s * exp(max_s - max), as in flash-decoding. Tile (l, t) merges every query head of token t:
// the decode graph runs it inline, on the SM whose attention split completes the token, so one
// task per token rather than one per head (which would run one after another there).
//   reads (o_part: KVS x T x HQ x D f32, ml: KVS x T x HQ x 2 f32), writes (attn: T x HQ D f32)

#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

template <class Block>
EVT_HD void attention_merge_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t t = tile[1];
  const int64_t splits = reads[0].dim(0), tokens = reads[0].dim(1), heads = reads[0].dim(2), d = reads[0].dim(3);
  const float* o = reads[0].as<const float>();
  const float* ml = reads[1].as<const float>();
  for (int64_t i = b.thread(); i < heads * d; i += b.threads()) {
    const int64_t hq = i / d;
    float max = -INFINITY;
    for (int64_t s = 0; s < splits; ++s) max = fmaxf(max, ml[((s * tokens + t) * heads + hq) * 2]);
    float num = 0, den = 0;
    for (int64_t s = 0; s < splits; ++s) {
      const float* state = ml + ((s * tokens + t) * heads + hq) * 2;
      if (state[1] == 0) continue;  // an empty split: its output is not a number to weigh
      const float w = state[1] * softmax_rescale(state[0], max);
      num += w * o[(s * tokens + t) * heads * d + i];
      den += w;
    }
    writes[0].as<float>()[t * heads * d + i] = den > 0 ? num / den : 0.0f;
  }
}

}  // namespace evt::kernels::llm
