#pragma once
// Finishes (head, token) pairs of the QKV projection (qkv_head.h: the K splits added, Qwen3's
// per-head RMSNorm, RoPE): a query head to q, a key or value head appended to the paged cache at
// the token's slot. Only a step in which some sequence has several tokens (a
// prefill chunk) runs these tiles: a token attends to the keys of the tokens before it in the same
// step, so every key must be in the cache before any attention starts. In a step of one token per
// sequence decode attention finishes its own heads instead (decode_attention.h), and the graph
// binds no qkv_finish tiles.
// Tile (l, n): the pairs [n * per, (n + 1) * per) of the (HQ + 2 HKV) x T pairs in head-major
// order, per = cfg's kCfgFinishPairs: as many pairs a tile as spread them evenly over the workers
// (a warp takes a pair at a time, each a chain of dependent loads).
// Templated on the head dim D, which selects the compiled graph.
//   reads (cfg, wtab, p_qkv, inv_freq: D/2 f32, tok_pos, tok_seq, block_table: S x MAXB i32),
//   writes (q: T x HQ x D f32, k_cache, v_cache: L x SLOTS x HKV x D bf16)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/qkv_head.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

template <int D, class Block>
EVT_HD void qkv_finish_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  constexpr int kPer = D / lanes();
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0];
  const QkvHeads q = qkv_heads(reads, 2, l, writes[1].dim(2), D);
  const int64_t per = cfg[kCfgFinishPairs], first = tile[1] * per;
  const int64_t end = min_of(first + per, q.width / D * q.tokens);
  const int32_t* pos = reads[4].as<const int32_t>();
  const int32_t* seq = reads[5].as<const int32_t>();
  const int32_t* table = reads[6].as<const int32_t>();
  const int64_t table_width = reads[6].dim(1);
  for (int64_t pair = first + warp(b); pair < end; pair += warps(b)) {
    // Pairs and tokens fit 32 bits, whose division is a few instructions (a 64-bit one is a call).
    const auto p = static_cast<uint32_t>(pair), tokens = static_cast<uint32_t>(q.tokens);
    const int64_t head = p / tokens, t = p % tokens;
    const bool is_q = head < q.heads, is_k = !is_q && head < q.heads + q.kv_heads;
    const int32_t position = pos[t], sequence = seq[t];
    float v[kPer];
    finish_qkv_head<D>(b, q, t, head, position, v);
    if (is_q) {
      float* out = writes[0].as<float>() + (t * q.heads + head) * D;
      for (int j = 0; j < kPer; ++j) out[lane(b) + lanes() * j] = v[j];
      continue;
    }
    const int64_t slot = kv_slot(table + static_cast<int64_t>(sequence) * table_width, position, cfg[kCfgPageSize]);
    const DevBuffer& cache = writes[is_k ? 1 : 2];
    uint16_t* out = cache.as<uint16_t>() + kv_row(cache, l, slot, head - q.heads - (is_k ? 0 : q.kv_heads));
    for (int j = 0; j < kPer; ++j) out[lane(b) + lanes() * j] = f32_to_bf16(v[j]);
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
