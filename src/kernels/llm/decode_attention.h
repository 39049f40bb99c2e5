#pragma once
// Decode attention over the paged KV cache, split along the KV positions. Tile (l, t, h, s)
// attends query token t's heads of KV group h (GQA: HQ / HKV query heads share one KV head) to
// the positions [s * split, (s + 1) * split) of 0..tok_pos[t] of its sequence. Each K/V row is
// read once for the whole group. Warps take positions in turn with an online softmax each, and
// merge their states in shared memory; the split's normalized output and its (max, sum) go to
// o_part and ml for attention_merge. An empty split writes max = -inf, sum = 0.
//   reads (cfg, q: T x HQ x D f32, k_cache, v_cache: L x SLOTS x HKV x D bf16, tok_pos, tok_seq,
//          block_table), writes (o_part: KVS x T x HQ x D f32, ml: KVS x T x HQ x 2 f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

inline constexpr int kMaxGroup = 8;  // query heads per KV head the compiled bodies support

template <int D, class Block>
EVT_HD void decode_attention_body(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                  const DevBuffer* writes) {
  constexpr int kPer = D / lanes();
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], t = tile[1], h = tile[2], s = tile[3];
  const int64_t tokens = reads[1].dim(0), heads = reads[1].dim(1);
  const int64_t slots = reads[2].dim(1), kv_heads = reads[2].dim(2);
  const int group = static_cast<int>(heads / kv_heads);
  const int32_t* pages = reads[6].as<const int32_t>() + reads[5].as<const int32_t>()[t] * reads[6].dim(1);
  const int64_t kv_len = reads[4].as<const int32_t>()[t] + 1, split = cfg[kCfgKvSplitLen];
  const int64_t p0 = min_of(s * split, kv_len), p1 = min_of(p0 + split, kv_len);
  const float scale = 1.0f / sqrtf(static_cast<float>(D));

  float qv[kMaxGroup][kPer], acc[kMaxGroup][kPer], m[kMaxGroup], sum[kMaxGroup];
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    sum[g] = 0;
    for (int j = 0; j < kPer; ++j) {
      acc[g][j] = 0;
      qv[g][j] = g < group ? reads[1].as<const float>()[(t * heads + h * group + g) * D + lane(b) + lanes() * j] * scale
                           : 0.0f;
    }
  }
  for (int64_t p = p0 + warp(b); p < p1; p += warps(b)) {
    const int64_t row = ((l * slots + kv_slot(pages, p, cfg[kCfgPageSize])) * kv_heads + h) * D;
    float kr[kPer], vr[kPer];
    for (int j = 0; j < kPer; ++j) {
      kr[j] = bf16_to_f32(reads[2].as<const uint16_t>()[row + lane(b) + lanes() * j]);
      vr[j] = bf16_to_f32(reads[3].as<const uint16_t>()[row + lane(b) + lanes() * j]);
    }
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= group) break;
      float dot = 0;
      for (int j = 0; j < kPer; ++j) dot += qv[g][j] * kr[j];
      dot = warp_sum(dot);
      const float m_new = fmaxf(m[g], dot), rescale = softmax_rescale(m[g], m_new), e = expf(dot - m_new);
      sum[g] = sum[g] * rescale + e;
      for (int j = 0; j < kPer; ++j) acc[g][j] = acc[g][j] * rescale + e * vr[j];
      m[g] = m_new;
    }
  }

  // Warps fold their states into shared memory one at a time.
#if defined(__CUDA_ARCH__)
  __shared__ float s_acc[kMaxGroup * D], s_m[kMaxGroup], s_sum[kMaxGroup];
#else
  float s_acc[kMaxGroup * D], s_m[kMaxGroup], s_sum[kMaxGroup];
#endif
  for (int w = 0; w < warps(b); ++w) {
    if (warp(b) == w) {
      for (int g = 0; g < group; ++g) {
        const float old_m = w == 0 ? -INFINITY : s_m[g], old_sum = w == 0 ? 0.0f : s_sum[g];
        const float m_new = fmaxf(old_m, m[g]);
        const float a = softmax_rescale(old_m, m_new), c = softmax_rescale(m[g], m_new);
        for (int j = 0; j < kPer; ++j) {
          float& out = s_acc[g * D + lane(b) + lanes() * j];
          out = (w == 0 ? 0.0f : out * a) + acc[g][j] * c;
        }
        warp_sync();
        if (lane(b) == 0) {
          s_m[g] = m_new;
          s_sum[g] = old_sum * a + sum[g] * c;
        }
      }
    }
    b.sync();
  }
  float* o = writes[0].as<float>() + ((s * tokens + t) * heads + h * group) * D;
  float* ml = writes[1].as<float>() + ((s * tokens + t) * heads + h * group) * 2;
  for (int i = b.thread(); i < group * D; i += b.threads()) {
    o[i] = s_sum[i / D] > 0 ? s_acc[i] / s_sum[i / D] : 0.0f;
  }
  for (int g = b.thread(); g < group; g += b.threads()) {
    ml[2 * g] = s_m[g];
    ml[2 * g + 1] = s_sum[g];
  }
  b.sync();  // the next task of this block reuses the shared state
}

template <class Block>
EVT_HD void decode_attention_d64_body(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                      const DevBuffer* writes) {
  decode_attention_body<64>(b, tile, reads, writes);
}
template <class Block>
EVT_HD void decode_attention_d128_body(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                       const DevBuffer* writes) {
  decode_attention_body<128>(b, tile, reads, writes);
}

}  // namespace evt::kernels::llm
