#pragma once
// Decode attention over the paged KV cache, split along the KV positions. Tile (l, t, h, s)
// attends query token t's heads of KV group h (GQA: HQ / HKV query heads share one KV head) to
// the positions [s * split, (s + 1) * split) of 0..tok_pos[t] of its sequence. Each K/V row is
// read once for the whole group. Warps take positions in turn with an online softmax each, and
// merge their states through the block's scratch; the split's normalized output and its
// (max, sum) go to o_part and ml for attention_merge. An empty split writes max = -inf, sum = 0.
//   reads (cfg, q: T x HQ x D f32, k_cache, v_cache: L x SLOTS x HKV x D bf16, tok_pos, tok_seq,
//          block_table), writes (o_part: KVS x T x HQ x D f32, ml: KVS x T x HQ x 2 f32)

#include "kernels/block_scratch.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

inline constexpr int kMaxGroup = 8;  // query heads per KV head the compiled bodies support

// The scratch decode_attention_body<d> uses: each warp's softmax state.
EVT_HD constexpr int64_t attention_scratch_bytes(int64_t d, int warps) {
  return (2 + d) * warps * kMaxGroup * 4;
}

// The body for groups of up to G query heads: their state stays in registers for the whole task.
template <int D, int G, class Block>
EVT_HD void decode_attention_group(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                   const DevBuffer* writes) {
  constexpr int kPer = D / lanes();  // dims per lane: lane i holds dims [i * kPer, (i + 1) * kPer)
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], t = tile[1], h = tile[2], s = tile[3];
  const int64_t tokens = reads[1].dim(0), heads = reads[1].dim(1);
  const int64_t slots = reads[2].dim(1), kv_heads = reads[2].dim(2);
  const int group = static_cast<int>(heads / kv_heads);
  const int32_t* pages = reads[6].as<const int32_t>() + reads[5].as<const int32_t>()[t] * reads[6].dim(1);
  const int64_t kv_len = reads[4].as<const int32_t>()[t] + 1, split = cfg[kCfgKvSplitLen];
  const int64_t p0 = min_of(s * split, kv_len), p1 = min_of(p0 + split, kv_len);
  const float scale = 1.0f / sqrtf(static_cast<float>(D));

  // Fully unrolled over the group and the dims, so that the state stays in registers.
  float qv[G][kPer], acc[G][kPer], m[G], sum[G];
  EVT_UNROLL
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    sum[g] = 0;
    const float* q = reads[1].as<const float>() + (t * heads + h * group + g) * D + lane(b) * kPer;
    EVT_UNROLL
    for (int j = 0; j < kPer; ++j) {
      acc[g][j] = 0;
      qv[g][j] = g < group ? q[j] * scale : 0.0f;
    }
  }
  // The split's page ids, one per lane (its first lanes() pages), so that a position's cache slot
  // needs no load of its own: each load that waits on another costs a round trip, ~1.4 us while
  // the other SMs stream weights (bench/README.md), and the slot used to be one before each row.
  // Positions and page sizes fit 32 bits, whose division is a few instructions (kv_slot).
  const auto page_size = static_cast<int32_t>(cfg[kCfgPageSize]);
  const int32_t first_page = static_cast<int32_t>(p0) / page_size;
  const int32_t split_pages = p0 < p1 ? static_cast<int32_t>(p1 - 1) / page_size - first_page + 1 : 0;
  const int32_t lane_page = lane(b) < split_pages ? pages[first_page + lane(b)] : 0;
  const auto slot_of = [&](int64_t p) {
    const int32_t page = static_cast<int32_t>(p) / page_size, k = page - first_page;
    return static_cast<int64_t>(k < lanes() ? warp_broadcast(lane_page, k) : pages[page]) * page_size +
           static_cast<int32_t>(p) % page_size;
  };
  const auto load_row = [&](int64_t p, float* kr, float* vr) {
    const int64_t row = ((l * slots + slot_of(p)) * kv_heads + h) * D + lane(b) * kPer;
    load_bf16s<kPer>(reads[2].as<const uint16_t>() + row, kr);
    load_bf16s<kPer>(reads[3].as<const uint16_t>() + row, vr);
  };
  // A warp's positions p0 + warp, + W, ..., kRowsInFlight at a time: all their rows' loads are in
  // flight before the first score. Three rows a warp take a 32-position split (B = 1 at short
  // contexts) in one round trip with 11 warps. A round is one online-softmax update per head, and
  // branch-free: every row's and head's score first (their warp reductions overlap), then each
  // head's new max over the round's rows, one rescale and the rows' weights. A row past the split
  // weighs 0; a head past the group has q = 0, and its state is never written out. (Row by row,
  // a score's reduction, max, rescale and update were one dependent chain per row and head: the
  // B = 16 tasks of Qwen3-8B took 52 us for 256 positions, 7 us a round.)
  constexpr int kRowsInFlight = 3;
  for (int64_t p = p0 + warp(b); p < p1; p += kRowsInFlight * warps(b)) {
    float kr[kRowsInFlight][kPer], vr[kRowsInFlight][kPer];
    bool valid[kRowsInFlight];
    EVT_UNROLL
    for (int i = 0; i < kRowsInFlight; ++i) {
      valid[i] = p + i * warps(b) < p1;
      EVT_UNROLL
      for (int j = 0; j < kPer; ++j) kr[i][j] = vr[i][j] = 0;
      if (valid[i]) load_row(p + i * warps(b), kr[i], vr[i]);
    }
    float score[kRowsInFlight][G];
    EVT_UNROLL
    for (int i = 0; i < kRowsInFlight; ++i) {
      EVT_UNROLL
      for (int g = 0; g < G; ++g) {
        float dot = 0;
        EVT_UNROLL
        for (int j = 0; j < kPer; ++j) dot += qv[g][j] * kr[i][j];
        score[i][g] = warp_sum(dot);
      }
    }
    EVT_UNROLL
    for (int g = 0; g < G; ++g) {
      float m_new = m[g];
      EVT_UNROLL
      for (int i = 0; i < kRowsInFlight; ++i) m_new = valid[i] ? fmaxf(m_new, score[i][g]) : m_new;
      const float rescale = softmax_rescale(m[g], m_new);
      float e[kRowsInFlight];
      EVT_UNROLL
      for (int i = 0; i < kRowsInFlight; ++i) e[i] = valid[i] ? approx_exp(score[i][g] - m_new) : 0.0f;
      float round_sum = 0;
      EVT_UNROLL
      for (int i = 0; i < kRowsInFlight; ++i) round_sum += e[i];
      sum[g] = sum[g] * rescale + round_sum;
      EVT_UNROLL
      for (int j = 0; j < kPer; ++j) {
        float v = acc[g][j] * rescale;
        EVT_UNROLL
        for (int i = 0; i < kRowsInFlight; ++i) v += e[i] * vr[i][j];
        acc[g][j] = v;
      }
      m[g] = m_new;
    }
  }

  // Every warp leaves its state in scratch; then the block merges them, one output value per
  // thread: warps' states are rescaled to the common max and added.
  const int nwarps = warps(b);
  float* w_m = reinterpret_cast<float*>(b.scratch().data);  // [warp][group]: attention_scratch_bytes
  float* w_sum = w_m + nwarps * kMaxGroup;                      // [warp][group]
  float* w_acc = w_sum + nwarps * kMaxGroup;                     // [warp][group][D]
  EVT_UNROLL
  for (int g = 0; g < G; ++g) {
    if (g < group) {
      EVT_UNROLL
      for (int j = 0; j < kPer; ++j) w_acc[(warp(b) * kMaxGroup + g) * D + lane(b) * kPer + j] = acc[g][j];
      if (lane(b) == 0) {
        w_m[warp(b) * kMaxGroup + g] = m[g];
        w_sum[warp(b) * kMaxGroup + g] = sum[g];
      }
    }
  }
  b.sync();
  float* o = writes[0].as<float>() + ((s * tokens + t) * heads + h * group) * D;
  float* ml = writes[1].as<float>() + ((s * tokens + t) * heads + h * group) * 2;
  for (int i = b.thread(); i < group * D; i += b.threads()) {
    const int g = i / D;
    float max = -INFINITY;
    for (int w = 0; w < nwarps; ++w) max = fmaxf(max, w_m[w * kMaxGroup + g]);
    float total = 0, value = 0;
    for (int w = 0; w < nwarps; ++w) {
      const float c = softmax_rescale(w_m[w * kMaxGroup + g], max);
      total += w_sum[w * kMaxGroup + g] * c;
      value += w_acc[(w * kMaxGroup + g) * D + i % D] * c;
    }
    o[i] = total > 0 ? value / total : 0.0f;
    if (i % D == 0) {
      ml[2 * g] = max;
      ml[2 * g + 1] = total;
    }
  }
  b.sync();  // the next task of this block reuses the scratch
}

// The group's heads' state takes 2 G (D / 32) registers a thread: a body per group size, so that
// Qwen3-8B (G = 4) holds 32 of them instead of kMaxGroup's 64 and runs no instructions for heads
// it does not have.
template <int D, class Block>
EVT_HD void decode_attention_body(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                  const DevBuffer* writes) {
  const int64_t group = reads[1].dim(1) / reads[2].dim(2);  // HQ / HKV
  if (group <= 1) return decode_attention_group<D, 1>(b, tile, reads, writes);
  if (group <= 2) return decode_attention_group<D, 2>(b, tile, reads, writes);
  if (group <= 4) return decode_attention_group<D, 4>(b, tile, reads, writes);
  decode_attention_group<D, kMaxGroup>(b, tile, reads, writes);
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
