#pragma once
// Finishes one head of the QKV projection for every token: adds up the K splits, applies
// Qwen3's per-head RMSNorm (q and k heads, when cfg says so) and RoPE (rotate-half pairs
// (i, i + D/2), angle = position * inv_freq[i] in f32, as Hugging Face computes it), then writes
// a query head to q, or appends a key or value head to the paged cache at the token's slot.
// Templated on the head dim D, which selects the compiled graph.
//   reads (cfg, wtab, p_qkv, inv_freq: D/2 f32, tok_pos, tok_seq, block_table: S x MAXB i32),
//   writes (q: T x HQ x D f32, k_cache, v_cache: L x SLOTS x HKV x D bf16)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// A task is a chain of dependent loads (the K splits' partial sums, the position and the norm
// weights, the cache slot), each a round trip of 1-2 us while other SMs stream weights; so the body
// issues every load that does not depend on another before it uses any: the head counts come
// from the buffers' shapes rather than cfg, and the splits' sums are loaded kSplitsInFlight at a
// time. A load past the last split reads the last one again, and the sum skips it: ptxas issues a
// predicated load only once the one before it has been used, so loads behind a condition go one
// round trip at a time.
template <int D, class Block>
EVT_HD void qkv_finish_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  constexpr int kPer = D / lanes();  // elements per lane: lane + lanes() * j
  constexpr int kHalf = kPer / 2;    // element j + kHalf is element j's RoPE partner
  constexpr int kSplitsInFlight = 4;
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], head = tile[1];
  const float* partial = reads[2].as<const float>();
  const int64_t splits = reads[2].dim(0), tokens = reads[2].dim(1), width = reads[2].dim(2);
  const int64_t heads = writes[0].dim(1), kv_heads = writes[1].dim(2);  // q: T x HQ x D, k_cache: L x SLOTS x HKV x D
  const bool is_q = head < heads, is_k = !is_q && head < heads + kv_heads;
  const float* inv_freq = reads[3].as<const float>();
  const int32_t* pos = reads[4].as<const int32_t>();
  const int32_t* seq = reads[5].as<const int32_t>();
  const int32_t* table = reads[6].as<const int32_t>();
  const int64_t table_width = reads[6].dim(1), slots = writes[1].dim(1);
  // Null without Qwen3's q/k norm (decode_config.h), so cfg need not be read first.
  const uint16_t* norm_w = is_q || is_k ? weight<uint16_t>(reads[1], l, is_q ? kWqNorm : kWkNorm) : nullptr;

  for (int64_t t = warp(b); t < tokens; t += warps(b)) {
    const int32_t position = pos[t], sequence = seq[t];
    float freq[kHalf];
    EVT_UNROLL
    for (int j = 0; j < kHalf; ++j) freq[j] = inv_freq[lane(b) + lanes() * j];
    float v[kPer] = {};
    for (int64_t k0 = 0; k0 < splits; k0 += kSplitsInFlight) {
      float part[kSplitsInFlight][kPer];
      EVT_UNROLL
      for (int u = 0; u < kSplitsInFlight; ++u) {
        EVT_UNROLL
        for (int j = 0; j < kPer; ++j) {
          part[u][j] = partial[(min_of<int64_t>(k0 + u, splits - 1) * tokens + t) * width + head * D + lane(b) + lanes() * j];
        }
      }
      EVT_UNROLL
      for (int u = 0; u < kSplitsInFlight; ++u) {
        EVT_UNROLL
        for (int j = 0; j < kPer; ++j) {
          if (k0 + u < splits) v[j] += part[u][j];
        }
      }
    }
    if (norm_w != nullptr) {
      float w[kPer];
      EVT_UNROLL
      for (int j = 0; j < kPer; ++j) w[j] = bf16_to_f32(norm_w[lane(b) + lanes() * j]);
      float sum = 0;
      for (int j = 0; j < kPer; ++j) sum += v[j] * v[j];
      const float scale = 1.0f / sqrtf(warp_sum(sum) / static_cast<float>(D) + bits_to_f32(cfg[kCfgEpsBits]));
      for (int j = 0; j < kPer; ++j) v[j] = v[j] * scale * w[j];
    }
    if (is_q || is_k) {
      for (int j = 0; j < kHalf; ++j) {
        const float angle = static_cast<float>(position) * freq[j];
        const float c = cosf(angle), s = sinf(angle), lo = v[j], hi = v[j + kHalf];
        v[j] = lo * c - hi * s;
        v[j + kHalf] = hi * c + lo * s;
      }
    }
    if (is_q) {
      float* out = writes[0].as<float>() + (t * heads + head) * D;
      for (int j = 0; j < kPer; ++j) out[lane(b) + lanes() * j] = v[j];
    } else {
      const int64_t slot = kv_slot(table + static_cast<int64_t>(sequence) * table_width, position, cfg[kCfgPageSize]);
      const int64_t kv_head = head - heads - (is_k ? 0 : kv_heads);
      uint16_t* out = writes[is_k ? 1 : 2].as<uint16_t>() + ((l * slots + slot) * kv_heads + kv_head) * D;
      for (int j = 0; j < kPer; ++j) out[lane(b) + lanes() * j] = f32_to_bf16(v[j]);
    }
  }
}

template <class Block>
EVT_HD void qkv_finish_d64_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  qkv_finish_body<64>(b, tile, reads, writes);
}
template <class Block>
EVT_HD void qkv_finish_d128_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  qkv_finish_body<128>(b, tile, reads, writes);
}

}  // namespace evt::kernels::llm
