#pragma once
// Decode attention over the paged KV cache, split along the KV positions. Tile (l, t, h, s)
// attends query token t's heads of KV group h (GQA: HQ / HKV query heads share one KV head) to
// the positions [s * split, (s + 1) * split) of 0..tok_pos[t] of its sequence. Each K/V row is
// read once for the whole group. Warps take positions in turn with an online softmax each, and
// merge their states through the block's scratch. With one split (KVS = 1) the output goes to
// attn in bf16, as o_proj stages it, and attention_merge has nothing to do; with several, each
// split's normalized output and its (max, sum) go to o_part and ml for attention_merge. An empty
// split writes max = -inf, sum = 0. Tile dim 1 is a run of tokens (decode_config.h's
// attention_run_stride), attended one after another, each as tile (l, t, h, s) above.
//
// In a decode step (one token per sequence: cfg's kCfgAttentionFinishes) the tile finishes its
// query heads itself from the QKV projection's K splits (qkv_head.h: the splits added, q norm,
// RoPE), so that no task between the projection and attention hands them over; and the split
// that holds token t's own position also finishes t's k and v of head h, appends them to the
// cache, and attends to that position from them rather than from the cache (no other task reads
// that row in this step). In a step with a prefill chunk, qkv_finish has written q and filled the
// cache before the tile starts.
//   reads (cfg, wtab, p_qkv: KQ x T x (HQ + 2 HKV) D f32, inv_freq: D/2 f32, q: T x HQ x D f32,
//          k_cache, v_cache: L x SLOTS x HKV x D bf16, tok_pos, tok_seq, block_table),
//   writes (o_part: KVS x T x HQ x D f32, ml: KVS x T x HQ x 2 f32, k_cache, v_cache: the own rows,
//           attn: T x HQ D bf16)
//
// On the GPU a warp takes 16 positions at a time on the tensor cores (decode_attention_mma); the
// host runs the same algorithm a row at a time (decode_attention_rows), which the CPU backend and
// the tests' references use.

#include "kernels/block_scratch.h"
#include "kernels/bulk_copy.h"
#include "kernels/l2_policy.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm/qkv_head.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

inline constexpr int kMaxGroup = 8;  // query heads per KV head the compiled bodies support

inline constexpr int kAttentionStepPositions = 16;  // the positions a GPU warp takes at a time

// The GPU body's scratch (the host's uses one warp's staged rows and the states): q's MMA fragments
// (d x 32 bytes), each warp's staged V rows (kAttentionStepPositions rows of 2 d + 16 bytes, padded
// so that the 8 rows an ldmatrix reads lie in distinct banks), then each warp's softmax max and
// sum, then each warp's mbarrier for its V copies, then the own position's state: its score per
// query head and its v row. A warp's output accumulators ([group][d] floats) go into its own staged
// rows once its last step has read them, and the finished q heads and own k row wait there before
// the loop: in space of their own they took 48 KiB at d = 128, which left the weight ring three 32
// KiB stages at B = 1 where four were meant (runtime/megakernel/shared_memory.h).
EVT_HD constexpr int64_t attention_stage_bytes(int64_t d) { return kAttentionStepPositions * (2 * d + 16); }
EVT_HD constexpr int64_t attention_stages_offset(int64_t d) { return d * 32; }
// Floats from one warp's accumulators ([kMaxGroup][D] floats) to the next's: a warp's staged rows,
// which hold them.
template <int D>
EVT_HD constexpr int64_t attention_acc_stride() {
  static_assert(kMaxGroup * D * 4 <= attention_stage_bytes(D), "a warp's output accumulators fit its staged V rows");
  return attention_stage_bytes(D) / 4;
}
EVT_HD constexpr int64_t attention_state_offset(int64_t d, int warps) {
  return attention_stages_offset(d) + int64_t{warps} * attention_stage_bytes(d);
}
EVT_HD constexpr int64_t attention_barrier_offset(int64_t d, int warps) {
  return attention_state_offset(d, warps) + 2 * int64_t{warps} * kMaxGroup * 4;
}
EVT_HD constexpr int64_t attention_own_offset(int64_t d, int warps) {
  return attention_barrier_offset(d, warps) + int64_t{warps} * 8;
}
EVT_HD constexpr int64_t attention_scratch_bytes(int64_t d, int warps) {
  return attention_own_offset(d, warps) + (kMaxGroup + d) * 4;
}

// The token's own position when this split appends it: its score for each query head (scaled by
// 1 / sqrt(D)) and its v row, as bf16 values. Null m: the split does not append.
struct OwnPosition {
  const float* m = nullptr;
  const float* v = nullptr;
};

// Every warp's softmax state in scratch; then the block merges them, one output value per
// thread: warps' states (and the own position's) are rescaled to the common max and added.
// w_m, w_sum: [warp][group]; w_acc: [warp][group][D], acc_stride floats from warp to warp.
template <class Block>
EVT_HD void attention_merge_warps(const Block& b, const int64_t* tile, const DevBuffer* writes, const float* w_m,
                                  const float* w_sum, const float* w_acc, int64_t acc_stride, OwnPosition own, int d) {
  const int64_t t = tile[1], h = tile[2], s = tile[3];
  const int64_t splits = writes[0].dim(0), tokens = writes[0].dim(1), heads = writes[0].dim(2);
  const int group = static_cast<int>(heads / writes[2].dim(2));
  const int nwarps = warps(b);
  float* o = writes[0].as<float>() + ((s * tokens + t) * heads + h * group) * d;
  float* ml = writes[1].as<float>() + ((s * tokens + t) * heads + h * group) * 2;
  uint16_t* attn = writes[4].as<uint16_t>() + (t * heads + h * group) * d;
  for (int i = b.thread(); i < group * d; i += b.threads()) {
    const int g = i / d;
    float max = own.m != nullptr ? own.m[g] : -INFINITY;
    for (int w = 0; w < nwarps; ++w) max = fmaxf(max, w_m[w * kMaxGroup + g]);
    float total = 0, value = 0;
    for (int w = 0; w < nwarps; ++w) {
      const float c = softmax_rescale(w_m[w * kMaxGroup + g], max);
      total += w_sum[w * kMaxGroup + g] * c;
      value += w_acc[w * acc_stride + g * d + i % d] * c;
    }
    if (own.m != nullptr) {
      const float c = softmax_rescale(own.m[g], max);
      total += c;
      value += own.v[i % d] * c;
    }
    const float out = total > 0 ? value / total : 0.0f;
    if (splits == 1) {
      attn[i] = f32_to_bf16(out);
      continue;
    }
    o[i] = out;
    if (i % d == 0) {
      ml[2 * g] = max;
      ml[2 * g + 1] = total;
    }
  }
  b.sync();  // the next task of this block reuses the scratch
}

// What tile (l, t, h, s) attends to: the positions [p0, p1) of token t's sequence from the
// cache, whose page ids are pages[position / page_size], and, when it appends, token t's own
// position (then past p1).
struct AttentionSplit {
  int64_t p0, p1;
  int32_t position;  // token t's
  bool finishes;     // a decode step: the tile finishes its q heads from p_qkv
  bool appends;      // ... and this split holds the own position
  const int32_t* pages;
  int32_t page_size;
  int group;  // query heads of the KV head
};
EVT_HD inline AttentionSplit attention_split(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t t = tile[1], s = tile[3];
  AttentionSplit a;
  a.position = reads[7].as<const int32_t>()[t];
  const int64_t kv_len = a.position + 1, split = cfg[kCfgKvSplitLen];
  a.p0 = min_of(s * split, kv_len);
  a.p1 = min_of(a.p0 + split, kv_len);
  a.finishes = cfg[kCfgAttentionFinishes] != 0;
  a.appends = a.finishes && a.p0 < a.p1 && a.p1 == kv_len;
  if (a.appends) a.p1 = a.position;
  a.pages = reads[9].as<const int32_t>() + reads[8].as<const int32_t>()[t] * reads[9].dim(1);
  a.page_size = cfg[kCfgPageSize];
  a.group = static_cast<int>(writes[0].dim(2) / reads[5].dim(2));
  return a;
}

// The head (a column block of p_qkv) of a tile's finishing job: its query heads first (jobs below
// the group), then, when the split appends, token t's own k (job = group) and v of KV head h.
EVT_HD inline int64_t finished_head(const QkvHeads& q, const AttentionSplit& a, int64_t h, int job) {
  return job < a.group ? h * a.group + job : q.heads + (job - a.group) * q.kv_heads + h;
}

// Token t's own k (which 0) or v (1) of KV head h, finished in v, appended to the cache; v becomes
// the values as the cache holds them, in the lanes' layout.
template <int D, class Block>
EVT_HD void append_own(const Block& b, const AttentionSplit& a, const int64_t* tile, const DevBuffer* writes,
                       int which, float (&v)[D / lanes()]) {
  const int64_t l = tile[0], h = tile[2];
  const DevBuffer& cache = writes[2 + which];
  uint16_t* out = cache.as<uint16_t>() + kv_row(cache, l, kv_slot(a.pages, a.position, a.page_size), h);
  for (int j = 0; j < D / lanes(); ++j) {
    const uint16_t x = f32_to_bf16(v[j]);
    out[lane(b) + lanes() * j] = x;
    v[j] = bf16_to_f32(x);
  }
}

#if defined(__CUDA_ARCH__)
// Four 8 x 8 bf16 matrices, transposed: lanes 8i .. 8i + 7 give the rows of matrix i.
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

// The GPU body. A warp takes 16 positions at a time (a step) and runs both products on the
// tensor cores (mma.m16n8k16), so that a position costs ~10 warp instructions instead of the
// ~120 of a row-per-warp body whose every score is a five-shuffle reduction (Qwen3-8B's B = 16
// tasks, 513 positions, took ~60 us at ~4 GB/s).
//  - Scores S = Q K^T: Q's up to 8 heads are the rows of A (rows 8-15 zero), a step's positions
//    the columns of two 8-wide tiles. The dims of a k-step are a permutation of the head dim,
//    the same for Q and K, chosen so that lane (g, c) (g = lane / 4, c = lane % 4) loads its B
//    registers for all k-steps as 16-byte runs of K row g: bytes [64j + 16c, +16), words x, y
//    for k-step 2j and z, w for 2j + 1. So K goes straight from global memory to registers.
//  - Outputs O^T = V^T P^T, so that the heads are the 8 columns (none wasted for groups of 8) and
//    P's registers are the scores' own: lane (g, c) holds head g's weights of positions 2c, 2c + 1
//    (tile 0) and 8 + 2c, 9 + 2c (tile 1), which is the B fragment. V^T's A fragments come from
//    the step's V rows, staged in shared memory by bulk copies and read with ldmatrix.trans.
//  - q (f32) and the weights P go in as bf16 pairs hi + lo, two MMAs each, so the products keep
//    ~16 bits (the tests hold the bodies to 1e-4); K and V are bf16 already.
// Every load of a step (K into registers, V into the stage) is issued before its first MMA:
// a warp has 8 KiB in flight, the block up to 88 KiB. K and V are read once a step, so both are
// read evict-first (kernels/l2_policy.h). V goes by bulk copy (one a row, completing on the
// warp's mbarrier) rather than cp.async: ptxas 13.0 compiled cp.async with a cache hint, in the
// tile test's kernel, into an LDGSTS on an uninitialized descriptor register (illegal instruction).
template <int D, class Block>
__device__ void decode_attention_mma(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                     const DevBuffer* writes) {
  static_assert(D % 64 == 0, "head dims of whole 64-dim blocks");
  constexpr int kStep = kAttentionStepPositions;
  constexpr int kSteps = D / 16;           // k-steps of q.k; m-tiles (16 dims) of V^T
  constexpr int kRowBytes = 2 * D + 16;    // a staged V row
  const AttentionSplit a = attention_split(tile, reads, writes);
  const int64_t l = tile[0], t = tile[1], h = tile[2];
  const int64_t slots = reads[5].dim(1), kv_heads = reads[5].dim(2);
  const int ln = lane(b), w = warp(b), nwarps = warps(b), g = ln / 4, c = ln % 4;
  unsigned char* scratch = b.scratch().data;
  auto* qfrag = reinterpret_cast<uint4*>(scratch);  // [k-step][lane]: a0 hi, a2 hi, a0 lo, a2 lo
  static_assert(kStep * kRowBytes == attention_stage_bytes(D), "the layout's staged rows");
  unsigned char* stage = scratch + attention_stages_offset(D) + w * kStep * kRowBytes;
  float* w_m = reinterpret_cast<float*>(scratch + attention_state_offset(D, nwarps));
  float* w_sum = w_m + nwarps * kMaxGroup;
  float* w_acc = reinterpret_cast<float*>(scratch + attention_stages_offset(D));
  constexpr int64_t kAccStride = attention_acc_stride<D>();
  auto* v_landed = reinterpret_cast<uint64_t*>(scratch + attention_barrier_offset(D, nwarps)) + w;
  float* own_m = reinterpret_cast<float*>(scratch + attention_own_offset(D, nwarps));
  float* own_v = own_m + kMaxGroup;
  float* q_rows = w_acc;                  // [group][D], until the loop's copies
  float* own_k = w_acc + kMaxGroup * D;   // [D]
  if (ln == 0) init_copy_barrier(v_landed);
  __syncwarp();
  uint32_t v_phase = 0;

  // The split's page ids, one per lane (its first 32 pages), so that a slot needs no load of its
  // own: a load that waits on another costs a round trip, ~1.4 us while other SMs stream weights.
  // Loaded first, to be in flight with the heads' partial sums.
  const int32_t first_page = static_cast<int32_t>(a.p0) / a.page_size;
  const int32_t split_pages = a.p0 < a.p1 ? static_cast<int32_t>(a.p1 - 1) / a.page_size - first_page + 1 : 0;
  const int32_t lane_page = ln < split_pages ? a.pages[first_page + ln] : 0;

  // In a decode step, the query heads (and the own k and v) finished from the projection's partial
  // sums, a warp each; none for a split past the token's context. A step with a prefill chunk
  // loads nothing for them.
  const QkvHeads qh = a.finishes ? qkv_heads(reads, 2, l, kv_heads, D) : QkvHeads{};
  const int jobs = a.appends ? a.group + 2 : a.finishes && a.p0 < a.p1 ? a.group : 0;
  // One call site for every job, so that the finishing's code is inlined once.
  for (int job = w; job < jobs; job += nwarps) {
    float v[D / 32];
    finish_qkv_head<D>(b, qh, t, finished_head(qh, a, h, job), a.position, v);
    if (job >= a.group) append_own<D>(b, a, tile, writes, job - a.group, v);
    float* keep = job < a.group ? q_rows + job * D : job == a.group ? own_k : own_v;
    EVT_UNROLL
    for (int j = 0; j < D / 32; ++j) keep[ln + 32 * j] = v[j];
  }
  if (a.finishes) b.sync();

  // Q's fragments, scaled by 1 / sqrt(D): k-step 2j + u, lane (g, c) holds dims 32j + 8c + 4u
  // + {0, 1} (a0) and + {2, 3} (a2) of head g; from q_rows or, when qkv_finish ran, from q.
  const float* q_src =
      a.finishes ? q_rows : reads[4].as<const float>() + (t * writes[0].dim(2) + h * a.group) * D;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  for (int i = b.thread(); i < kSteps * 32; i += b.threads()) {
    const int ks = i / 32, fg = (i % 32) / 4, fc = i % 4;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (fg < a.group) {
      const float4 x = *reinterpret_cast<const float4*>(q_src + fg * D + 32 * (ks / 2) + 8 * fc + 4 * (ks % 2));
      split_bf16x2(x.x * scale, x.y * scale, v.x, v.z);
      split_bf16x2(x.z * scale, x.w * scale, v.y, v.w);
    }
    qfrag[i] = v;
  }
  // The own position's score for each query head, in f32 (the MMAs keep ~16 bits of q).
  for (int hg = w; a.appends && hg < a.group; hg += nwarps) {
    float dot = 0;
    EVT_UNROLL
    for (int j = 0; j < D / 32; ++j) dot += q_rows[hg * D + ln + 32 * j] * scale * own_k[ln + 32 * j];
    dot = warp_sum(dot);
    if (ln == 0) own_m[hg] = dot;
  }
  // The loop's bulk copies overwrite q_rows and own_k (and whatever the block's last task left in
  // the stages): the reads and writes above come first.
  fence_proxy_async_shared();
  b.sync();

  const uint16_t* k_rows = reads[5].as<const uint16_t>() + (l * slots * kv_heads + h) * D;
  const uint16_t* v_rows = reads[6].as<const uint16_t>() + (l * slots * kv_heads + h) * D;
  const int64_t row_stride = kv_heads * D;

  const uint64_t once = evict_first_policy();
  float m = -INFINITY, sum = 0;  // head g's running max; the sum over this lane's positions
  float acc[kSteps][4];          // O^T, m-tile i: dims 16i + g (+ 8) x heads 2c, 2c + 1
  EVT_UNROLL
  for (int i = 0; i < kSteps; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0;
  for (auto p = static_cast<int32_t>(a.p0) + kStep * w; p < a.p1; p += kStep * nwarps) {
    // Lane j (and j + 16) finds the slot of position p + j, clamped into the split: a row past it
    // is loaded (real data, so no NaN) and weighs 0.
    const int32_t pj = min_of<int32_t>(p + ln % kStep, static_cast<int32_t>(a.p1) - 1);
    const int32_t k = pj / a.page_size - first_page;
    const int32_t page = warp_broadcast(lane_page, k % 32);
    const int32_t slot = (k < 32 ? page : a.pages[first_page + k]) * a.page_size + pj % a.page_size;

    uint4 kf[2][D / 32];
    EVT_UNROLL
    for (int n = 0; n < 2; ++n) {
      const uint16_t* row = k_rows + warp_broadcast(slot, 8 * n + g) * row_stride + 8 * c;
      EVT_UNROLL
      for (int j = 0; j < D / 32; ++j) kf[n][j] = load16(row + 32 * j, once);
    }
    // The step's V rows, one bulk copy each by lanes 0-15, after lane 0 has told the barrier
    // how many bytes will land.
    if (ln == 0) expect_copy_bytes(v_landed, kStep * 2 * D);
    __syncwarp();
    if (ln < kStep) copy_bulk(stage + ln * kRowBytes, v_rows + slot * row_stride, 2 * D, v_landed, once);

    float sc[2][4] = {};
    EVT_UNROLL
    for (int ks = 0; ks < kSteps; ++ks) {
      const uint4 qa = qfrag[ks * 32 + ln];
      EVT_UNROLL
      for (int n = 0; n < 2; ++n) {
        const uint4 kv = kf[n][ks / 2];
        const uint32_t b0 = ks % 2 ? kv.z : kv.x, b1 = ks % 2 ? kv.w : kv.y;
        mma_bf16(sc[n], qa.x, 0, qa.y, 0, b0, b1);
        mma_bf16(sc[n], qa.z, 0, qa.w, 0, b0, b1);
      }
    }

    // Head g's online softmax over the step: lane (g, c) holds positions p + 2c, + 1, + 8, + 9.
    const float s4[4] = {sc[0][0], sc[0][1], sc[1][0], sc[1][1]};
    const int32_t at[4] = {p + 2 * c, p + 2 * c + 1, p + 8 + 2 * c, p + 9 + 2 * c};
    float mx = m;
    EVT_UNROLL
    for (int i = 0; i < 4; ++i) mx = at[i] < a.p1 ? fmaxf(mx, s4[i]) : mx;
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float rescale = softmax_rescale(m, mx);
    float e[4];
    EVT_UNROLL
    for (int i = 0; i < 4; ++i) e[i] = at[i] < a.p1 ? approx_exp(s4[i] - mx) : 0.0f;
    sum = sum * rescale + ((e[0] + e[1]) + (e[2] + e[3]));
    m = mx;
    uint32_t p_hi0, p_lo0, p_hi1, p_lo1;
    split_bf16x2(e[0], e[1], p_hi0, p_lo0);
    split_bf16x2(e[2], e[3], p_hi1, p_lo1);
    // The accumulators of heads 2c and 2c + 1 rescale by those heads' factors (lanes 8c, 8c + 4).
    const float r0 = __shfl_sync(0xffffffffu, rescale, 8 * c), r1 = __shfl_sync(0xffffffffu, rescale, 8 * c + 4);

    wait_copies(v_landed, v_phase);
    v_phase ^= 1;
    EVT_UNROLL
    for (int i = 0; i < kSteps; ++i) {
      // Matrix q = ln / 8 of V^T's m-tile i: positions 8 (q / 2) + row, dims 16i + 8 (q % 2).
      uint32_t va[4];
      ldmatrix_x4_trans(va, stage + (8 * (ln / 16) + ln % 8) * kRowBytes + (16 * i + 8 * ((ln / 8) % 2)) * 2);
      acc[i][0] *= r0, acc[i][1] *= r1, acc[i][2] *= r0, acc[i][3] *= r1;
      mma_bf16(acc[i], va[0], va[1], va[2], va[3], p_hi0, p_hi1);
      mma_bf16(acc[i], va[0], va[1], va[2], va[3], p_lo0, p_lo1);
    }
    // The next step's copies overwrite the stage: every lane's reads of it come first.
    __syncwarp();
    fence_proxy_async_shared();
  }
  if (ln == 0) inval_copy_barrier(v_landed);  // the scratch serves other bodies next

  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if (c == 0 && g < a.group) {
    w_m[w * kMaxGroup + g] = m;
    w_sum[w * kMaxGroup + g] = sum;
  }
  EVT_UNROLL
  for (int u = 0; u < 2; ++u) {
    if (2 * c + u < a.group) {
      float* out = w_acc + w * kAccStride + (2 * c + u) * D + g;
      EVT_UNROLL
      for (int i = 0; i < kSteps; ++i) {
        out[16 * i] = acc[i][u];
        out[16 * i + 8] = acc[i][2 + u];
      }
    }
  }
  b.sync();
  attention_merge_warps(b, tile, writes, w_m, w_sum, w_acc, kAccStride,
                        a.appends ? OwnPosition{own_m, own_v} : OwnPosition{}, D);
}
#else
// The host's body (a block of one thread): the positions in order, one online-softmax update per
// position and head.
template <int D, class Block>
void decode_attention_rows(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const AttentionSplit a = attention_split(tile, reads, writes);
  const int64_t l = tile[0], t = tile[1], h = tile[2];
  const int64_t slots = reads[5].dim(1), kv_heads = reads[5].dim(2), heads = writes[0].dim(2);
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  float* w_m = reinterpret_cast<float*>(b.scratch().data + attention_state_offset(D, 1));
  float* w_sum = w_m + kMaxGroup;
  float* w_acc = reinterpret_cast<float*>(b.scratch().data + attention_stages_offset(D));
  float* own_m = reinterpret_cast<float*>(b.scratch().data + attention_own_offset(D, 1));
  float* own_v = own_m + kMaxGroup;
  const QkvHeads qh = qkv_heads(reads, 2, l, kv_heads, D);
  float qv[kMaxGroup][D];
  for (int g = 0; g < a.group; ++g) {
    if (a.finishes) {
      finish_qkv_head<D>(b, qh, t, finished_head(qh, a, h, g), a.position, qv[g]);
    } else {
      const float* q = reads[4].as<const float>() + (t * heads + h * a.group + g) * D;
      for (int j = 0; j < D; ++j) qv[g][j] = q[j];
    }
    for (int j = 0; j < D; ++j) qv[g][j] *= scale, w_acc[g * D + j] = 0;
    w_m[g] = -INFINITY, w_sum[g] = 0;
  }
  if (a.appends) {
    float own[2][D];  // k, v
    for (int which = 0; which < 2; ++which) {
      finish_qkv_head<D>(b, qh, t, finished_head(qh, a, h, a.group + which), a.position, own[which]);
      append_own<D>(b, a, tile, writes, which, own[which]);
    }
    const float* own_k = own[0];
    for (int j = 0; j < D; ++j) own_v[j] = own[1][j];
    for (int g = 0; g < a.group; ++g) {
      own_m[g] = 0;
      for (int j = 0; j < D; ++j) own_m[g] += qv[g][j] * own_k[j];
    }
  }
  for (int64_t p = a.p0; p < a.p1; ++p) {
    const int64_t slot = int64_t{a.pages[p / a.page_size]} * a.page_size + p % a.page_size;
    const int64_t row = ((l * slots + slot) * kv_heads + h) * D;
    float kr[D], vr[D];
    load_bf16s<D>(reads[5].as<const uint16_t>() + row, kr);
    load_bf16s<D>(reads[6].as<const uint16_t>() + row, vr);
    for (int g = 0; g < a.group; ++g) {
      float score = 0;
      for (int j = 0; j < D; ++j) score += qv[g][j] * kr[j];
      const float m_new = fmaxf(w_m[g], score), rescale = softmax_rescale(w_m[g], m_new), e = approx_exp(score - m_new);
      w_sum[g] = w_sum[g] * rescale + e;
      for (int j = 0; j < D; ++j) w_acc[g * D + j] = w_acc[g * D + j] * rescale + e * vr[j];
      w_m[g] = m_new;
    }
  }
  attention_merge_warps(b, tile, writes, w_m, w_sum, w_acc, attention_acc_stride<D>(),
                        a.appends ? OwnPosition{own_m, own_v} : OwnPosition{}, D);
}
#endif

// Tile (l, run, h, s): each token of the run (decode_config.h) in turn.
template <int D, class Block>
EVT_HD void decode_attention_body(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                  const DevBuffer* writes) {
  const int64_t tokens = reads[7].dim(0);
  const int32_t runs = reads[0].as<const int32_t>()[kCfgAttentionRuns];
  for (int64_t t = tile[1]; t < tokens; t += attention_run_stride(runs, tokens)) {
    const int64_t one[4] = {tile[0], t, tile[2], tile[3]};
#if defined(__CUDA_ARCH__)
    decode_attention_mma<D>(b, one, reads, writes);
#else
    decode_attention_rows<D>(b, one, reads, writes);
#endif
  }
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
