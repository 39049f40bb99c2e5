#pragma once
// One head of the QKV projection finished for one token, by one warp: its K splits' partial sums
// (p_qkv: KQ x T x (HQ + 2 HKV) D f32, written by qkv_proj) added up, Qwen3's per-head RMSNorm on
// q and k heads (when cfg says so), and RoPE on q and k heads (rotate-half pairs (i, i + D/2),
// angle = position * inv_freq[i] in f32, as Hugging Face computes it). Lane j holds the elements
// j + lanes() * i. In a decode step attention finishes its query heads (and, when it appends, its
// token's k and v) with it; in a step with a prefill chunk qkv_finish every head. Both must round
// alike, since a key one of them appends is attended to in later steps.

#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// What finishing a head reads besides the partial sums.
struct QkvHeads {
  const float* partial;
  int64_t splits, tokens, width;
  int64_t heads, kv_heads;  // HQ, HKV
  const uint16_t* q_norm;   // null without Qwen3's q/k norm
  const uint16_t* k_norm;
  float eps;
  const float* inv_freq;    // D / 2
};

// From a body's reads: cfg at 0, wtab at 1, p_qkv at `first` and inv_freq at `first` + 1 (both
// bodies list them so). The head counts come from the buffers' shapes (kv_heads from the cache's,
// L x SLOTS x HKV x D) rather than cfg, so that no load waits on cfg's.
EVT_HD inline QkvHeads qkv_heads(const DevBuffer* reads, int first, int64_t layer, int64_t kv_heads, int64_t d) {
  const DevBuffer& p = reads[first];
  QkvHeads q;
  q.partial = p.as<const float>();
  q.splits = p.dim(0), q.tokens = p.dim(1), q.width = p.dim(2);
  q.kv_heads = kv_heads;
  q.heads = q.width / d - 2 * kv_heads;
  // Null without Qwen3's q/k norm (decode_config.h), so cfg need not be read first.
  q.q_norm = weight<uint16_t>(reads[1], layer, kWqNorm);
  q.k_norm = weight<uint16_t>(reads[1], layer, kWkNorm);
  q.eps = bits_to_f32(reads[0].as<const int32_t>()[kCfgEpsBits]);
  q.inv_freq = reads[first + 1].as<const float>();
  return q;
}

// sinf and cosf of one angle. On the GPU sincosf reduces the argument once for both: each of
// sinf and cosf carries its own slow path for large angles (a loop over a table in local
// memory), inlined at every call, and a decode entry finishes heads in several places.
EVT_HD inline void sin_cos(float angle, float& s, float& c) {
#if defined(__CUDA_ARCH__)
  sincosf(angle, &s, &c);
#else
  s = sinf(angle);
  c = cosf(angle);
#endif
}

// Head `head` (a column block of p_qkv: q heads, then k, then v) of token t at `position`. The
// loads do not depend on one another, so they are all issued before any is used: a load that
// waits on another is a round trip of 1-2 us while other SMs stream weights. A load past the last
// split reads the last one again and the sum skips it: ptxas issues a predicated load only once
// the one before it has been used.
template <int D, class Block>
EVT_HD void finish_qkv_head(const Block& b, const QkvHeads& q, int64_t t, int64_t head, int32_t position,
                            float (&v)[D / lanes()]) {
  constexpr int kPer = D / lanes();
  constexpr int kHalf = kPer / 2;  // element j + kHalf is element j's RoPE partner
  constexpr int kSplitsInFlight = 4;
  const bool is_q = head < q.heads, is_k = !is_q && head < q.heads + q.kv_heads;
  const uint16_t* norm_w = is_q ? q.q_norm : is_k ? q.k_norm : nullptr;
  float freq[kHalf];
  EVT_UNROLL
  for (int j = 0; j < kHalf; ++j) freq[j] = q.inv_freq[lane(b) + lanes() * j];
  EVT_UNROLL
  for (int j = 0; j < kPer; ++j) v[j] = 0;
  for (int64_t k0 = 0; k0 < q.splits; k0 += kSplitsInFlight) {
    float part[kSplitsInFlight][kPer];
    EVT_UNROLL
    for (int u = 0; u < kSplitsInFlight; ++u) {
      EVT_UNROLL
      for (int j = 0; j < kPer; ++j) {
        part[u][j] = q.partial[(min_of<int64_t>(k0 + u, q.splits - 1) * q.tokens + t) * q.width + head * D + lane(b) +
                               lanes() * j];
      }
    }
    EVT_UNROLL
    for (int u = 0; u < kSplitsInFlight; ++u) {
      EVT_UNROLL
      for (int j = 0; j < kPer; ++j) {
        if (k0 + u < q.splits) v[j] += part[u][j];
      }
    }
  }
  if (norm_w != nullptr) {
    float w[kPer];
    EVT_UNROLL
    for (int j = 0; j < kPer; ++j) w[j] = bf16_to_f32(norm_w[lane(b) + lanes() * j]);
    float sum = 0;
    for (int j = 0; j < kPer; ++j) sum += v[j] * v[j];
    const float scale = 1.0f / sqrtf(warp_sum(sum) / static_cast<float>(D) + q.eps);
    for (int j = 0; j < kPer; ++j) v[j] = v[j] * scale * w[j];
  }
  if (is_q || is_k) {
    for (int j = 0; j < kHalf; ++j) {
      float c, s;
      sin_cos(static_cast<float>(position) * freq[j], s, c);
      const float lo = v[j], hi = v[j + kHalf];
      v[j] = lo * c - hi * s;
      v[j + kHalf] = hi * c + lo * s;
    }
  }
}

// The cache row of (layer, slot, KV head): L x SLOTS x HKV x D.
EVT_HD inline int64_t kv_row(const DevBuffer& cache, int64_t layer, int64_t slot, int64_t kv_head) {
  return ((layer * cache.dim(1) + slot) * cache.dim(2) + kv_head) * cache.dim(3);
}

}  // namespace evt::kernels::llm
