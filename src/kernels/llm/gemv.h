#pragma once
// The matrix-vector core of every projection tile: rows [n0, n1) of a bf16 weight matrix times
// the activations of every token of the step, over the columns [k0, k1), with the input's RMSNorm
// optionally fused in.
//
// Decode streams each weight once, so the design is about keeping loads in flight:
//  1. The block stages the tile's activations in shared memory once, normalized and rounded to
//     bf16 (as Hugging Face feeds its bf16 linears), up to kChunkTokens tokens at a time.
//  2. The tile's rows form groups of kGroupRows; (group, 32-column block) pairs are dealt out to
//     the warps in equal contiguous runs, so every warp streams the same number of bytes whatever
//     the tile's shape, splitting K inside a group where the groups are fewer than the warps.
//  3. A warp multiplies with tensor cores (mma m16n8k16: 16 weight rows x 8 tokens): each lane
//     loads 16 contiguous bytes of two weight rows per 32 columns, kUnroll blocks ahead, and
//     16 bytes of one token's activations from shared memory. The MMA sums over k in any order,
//     so the columns are permuted to make those loads contiguous (mma_segment below).
//  4. Each warp's partial sums land in a shared-memory slot; the block adds the slots of each
//     group and hands each (token, output) to the caller's epilogue.
// On the host (a block of one thread) the same staging and slots run, with a scalar multiply.

#include "kernels/block_scratch.h"
#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

inline constexpr int kGroupRows = 16;    // weight rows one MMA covers
inline constexpr int kChunkTokens = 16;  // tokens one pass multiplies: two 8-token MMA column tiles
inline constexpr int kBlockK = 32;       // columns per two MMAs (k = 16 each)
inline constexpr int kUnroll = 4;        // column blocks whose weights a lane loads before using one
inline constexpr int kSlotFloats = kGroupRows * kChunkTokens;  // one warp's sums for one group
inline constexpr int kMaxWarps = 32;   // of a 1024-thread block: the norm's partial sums
inline constexpr int64_t kPrefetchBlocks = 8;  // column blocks per row the prologue pulls into L2
// The host's one thread plays the warps of a decode block (decode_config.h) in turn, so that the
// CPU tests cover how a tile's work is dealt out to the GPU's warps and added back up.
inline constexpr int kHostWarps = 16;

template <class Block>
EVT_HD int gemv_warps(const Block& b) {
#if defined(__CUDA_ARCH__)
  return warps(b);
#else
  (void)b;
  return kHostWarps;
#endif
}

struct GemvInput {
  const float* x = nullptr;  // token t's row starts at x + t * ld
  int64_t ld = 0;
  int64_t tokens = 0;
  // Fused RMSNorm: null for none. Otherwise each row is scaled by 1 / sqrt(mean(row^2) + eps)
  // over its first norm_len values and each column k by norm_w[k].
  const uint16_t* norm_w = nullptr;
  int64_t norm_len = 0;
  float eps = 0;
};

// How a tile's work is laid out in scratch and over the warps; every thread computes the same.
struct GemvPlan {
  int64_t blocks_k;  // 32-column blocks of [k0, k1)
  int64_t stride;    // staged row length, elements (staged_row)
  int64_t chunk;     // tokens staged per pass
  int64_t groups;    // row groups of the tile
  int64_t round;     // groups per round: each round's slots fit the scratch
  float* red;        // kMaxWarps sum-of-squares partials
  float* scale;      // kChunkTokens RMSNorm scales
  float* slots;      // (round + warps - 1) x kSlotFloats
  uint16_t* stage;   // chunk x stride bf16
};

inline constexpr int64_t kGemvHeaderBytes = (kMaxWarps + kChunkTokens) * 4;

// 32-column blocks of a tile `k` columns wide, and the length of a staged row, in elements:
// whole blocks, one more when that makes rows 64 bytes apart modulo 128 (no bank conflicts).
EVT_HD constexpr int64_t column_blocks(int64_t k) { return (k + kBlockK - 1) / kBlockK; }
EVT_HD constexpr int64_t staged_row(int64_t k) {
  return column_blocks(k) * kBlockK + (column_blocks(k) % 2 == 0 ? kBlockK : 0);
}

// The scratch a tile over `k` columns of `tokens` tokens uses: all its tokens staged at once (up
// to kChunkTokens) and rounds of 17 groups. gemv_min_scratch: the least it runs in, one token
// and one group at a time.
EVT_HD constexpr int64_t gemv_scratch_bytes(int64_t k, int64_t tokens, int warps, int64_t round = 17) {
  const int64_t row_bytes = staged_row(k) * 2;
  const int64_t staged = tokens < kChunkTokens ? tokens : kChunkTokens;
  return kGemvHeaderBytes + (warps + round - 1) * kSlotFloats * 4 + staged * row_bytes;
}
EVT_HD constexpr int64_t gemv_min_scratch(int64_t k, int warps) { return gemv_scratch_bytes(k, 1, warps, 1); }

template <int kRows>
EVT_HD inline GemvPlan gemv_plan(int warps, int64_t tokens, int64_t n0, int64_t n1, int64_t k0, int64_t k1) {
  const Scratch s = block_scratch();
  GemvPlan p;
  p.blocks_k = column_blocks(k1 - k0);
  p.stride = staged_row(k1 - k0);
  constexpr int64_t outs = kGroupRows / kRows;
  p.groups = (n1 - n0 + outs - 1) / outs;
  const int64_t slot_bytes = kSlotFloats * 4, row_bytes = p.stride * 2;
  const int64_t room = s.bytes - kGemvHeaderBytes - warps * slot_bytes;
  p.chunk = max_of<int64_t>(1, min_of<int64_t>(min_of<int64_t>(kChunkTokens, tokens), room / row_bytes));
  p.round = min_of<int64_t>(p.groups, (room - p.chunk * row_bytes) / slot_bytes + 1);
  p.red = reinterpret_cast<float*>(s.data);
  p.scale = p.red + kMaxWarps;
  p.slots = p.scale + kChunkTokens;
  p.stage = reinterpret_cast<uint16_t*>(p.slots + (p.round + warps - 1) * kSlotFloats);
  return p;
}

// Stages tokens [c0, c0 + count) of the input, columns [k0, k1), as bf16(x * norm scale * norm_w)
// (or bf16(x) without a norm). Ends with a block barrier.
template <class Block>
EVT_HD void stage_tokens(const Block& b, const GemvInput& in, const GemvPlan& p, int64_t c0, int64_t count, int64_t k0,
                         int64_t k1) {
  if (in.norm_w != nullptr) {
    // Sum of squares of each row, split over the warps when the tokens are fewer.
    const int64_t parts = max_of<int64_t>(1, warps(b) / count);
    const int64_t per = ((in.norm_len + parts - 1) / parts + 7) / 8 * 8;
    for (int64_t i = warp(b); i < count * parts; i += warps(b)) {
      const float* row = in.x + (c0 + i / parts) * in.ld;
      const int64_t s1 = min_of<int64_t>(in.norm_len, (i % parts + 1) * per);
      float sum = 0, v[8];
      for (int64_t k = (i % parts) * per + 8 * lane(b); k < s1; k += 8 * lanes()) {
        load8_f32(row + k, v);
        for (int j = 0; j < 8; ++j) sum += v[j] * v[j];
      }
      sum = warp_sum(sum);
      if (lane(b) == 0) p.red[i] = sum;
    }
    b.sync();
    for (int64_t t = b.thread(); t < count; t += b.threads()) {
      float sum = 0;
      for (int64_t j = 0; j < parts; ++j) sum += p.red[t * parts + j];
      p.scale[t] = 1.0f / sqrtf(sum / static_cast<float>(in.norm_len) + in.eps);
    }
    b.sync();
  }
  const int64_t octets = (k1 - k0) / 8;
  for (int64_t i = b.thread(); i < count * octets; i += b.threads()) {
    const int64_t t = i / octets, k = k0 + 8 * (i % octets);
    float v[8];
    load8_f32(in.x + (c0 + t) * in.ld + k, v);
    if (in.norm_w != nullptr) {
      float g[8];
      load8_bf16(in.norm_w + k, g);
      for (int j = 0; j < 8; ++j) v[j] *= g[j] * p.scale[t];
    }
    store_bf16x8(p.stage + t * p.stride + (k - k0), v);
  }
  b.sync();
}

// The weight rows of group `first` (its first output): kRows = 1 puts outputs first..first+15 on
// the group's rows; kRows = 2 (gate and up) puts outputs first..first+7 on rows 0-7 (matrix 0)
// and 8-15 (matrix 1). Rows of outputs at or past n1 are null.
template <int kRows, class RowPtrs>
EVT_HD inline const uint16_t* group_row(int64_t first, int64_t n1, int r, RowPtrs& rows) {
  const int64_t n = kRows == 1 ? first + r : first + r % 8;
  if (n >= n1) return nullptr;
  const uint16_t* w[kRows];
  rows(n, w);
  return w[kRows == 1 ? 0 : r / 8];
}

#if defined(__CUDA_ARCH__)
// d += a b for one 16 x 8 x 16 tile: a holds rows (g, g+8) x k (2c, 2c+1, 2c+8, 2c+9) of lane
// (g = lane / 4, c = lane % 4), b holds k (2c, 2c+1, 2c+8, 2c+9) of column g; d holds rows
// (g, g+8) x columns (2c, 2c+1).
__device__ inline void mma_bf16(float* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One warp: column blocks [a, e) of one group into `slot`. Lane (g, c) loads columns
// 8c..8c+7 of each 32-column block from rows g and g+8 and from tokens g (and g + 8): with k
// slots 2c, 2c+1, 2c+8, 2c+9 of the first MMA holding columns 8c..8c+3 and those of the second
// 8c+4..8c+7, A and B see the same permutation of k, so the sum is unchanged.
template <int kRows, int kTiles, class RowPtrs>
__device__ void mma_segment(const GemvPlan& p, int64_t count, int64_t k0, int64_t k1, int64_t first, int64_t n1,
                            int64_t a, int64_t e, RowPtrs& rows, float* slot) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const uint16_t* lo = group_row<kRows>(first, n1, g, rows);
  const uint16_t* hi = group_row<kRows>(first, n1, g + 8, rows);
  const uint16_t* x[kTiles];
  for (int nt = 0; nt < kTiles; ++nt) x[nt] = p.stage + min_of<int64_t>(nt * 8 + g, count - 1) * p.stride + 8 * c;
  float acc[kTiles][4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t kb = a; kb < e; kb += kUnroll) {
    uint4 wl[kUnroll], wh[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t col = (kb + u) * kBlockK + 8 * c;
      const bool ok = kb + u < e && k0 + col < k1;
      wl[u] = ok && lo != nullptr ? __ldcs(reinterpret_cast<const uint4*>(lo + k0 + col)) : zero;
      wh[u] = ok && hi != nullptr ? __ldcs(reinterpret_cast<const uint4*>(hi + k0 + col)) : zero;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool ok = kb + u < e && k0 + (kb + u) * kBlockK + 8 * c < k1;
#pragma unroll
      for (int nt = 0; nt < kTiles; ++nt) {
        const uint4 xv = ok ? *reinterpret_cast<const uint4*>(x[nt] + (kb + u) * kBlockK) : zero;
        mma_bf16(acc[nt], wl[u].x, wh[u].x, wl[u].y, wh[u].y, xv.x, xv.y);
        mma_bf16(acc[nt], wl[u].z, wh[u].z, wl[u].w, wh[u].w, xv.z, xv.w);
      }
    }
  }
  for (int nt = 0; nt < kTiles; ++nt) {
    const int col = nt * 8 + 2 * c;
    slot[g * kChunkTokens + col] = acc[nt][0];
    slot[g * kChunkTokens + col + 1] = acc[nt][1];
    slot[(g + 8) * kChunkTokens + col] = acc[nt][2];
    slot[(g + 8) * kChunkTokens + col + 1] = acc[nt][3];
  }
}
#endif

// The same on the host: a block of one thread.
template <int kRows, class RowPtrs>
inline void scalar_segment(const GemvPlan& p, int64_t count, int64_t k0, int64_t k1, int64_t first, int64_t n1,
                           int64_t a, int64_t e, RowPtrs& rows, float* slot) {
  const int64_t c1 = min_of<int64_t>(e * kBlockK, k1 - k0);
  for (int r = 0; r < kGroupRows; ++r) {
    const uint16_t* w = group_row<kRows>(first, n1, r, rows);
    for (int64_t t = 0; t < count; ++t) {
      float sum = 0;
      for (int64_t col = a * kBlockK; w != nullptr && col < c1; ++col) {
        sum += bf16_to_f32(w[k0 + col]) * bf16_to_f32(p.stage[t * p.stride + col]);
      }
      slot[r * kChunkTokens + t] = sum;
    }
  }
}

// One tile's GEMV, built once by a tile function and handed to gemv_run (in its body) and
// gemv_prefetch (in its prologue), so that both see the same rows.
template <int kRows_, class RowPtrs, class Epilogue>
struct GemvJob {
  static constexpr int kRows = kRows_;
  GemvInput in;
  int64_t n0, n1, k0, k1;
  RowPtrs rows;
  Epilogue epi;
};

template <int kRows, class RowPtrs, class Epilogue>
EVT_HD GemvJob<kRows, RowPtrs, Epilogue> gemv_job(const GemvInput& in, int64_t n0, int64_t n1, int64_t k0, int64_t k1,
                                                  RowPtrs rows, Epilogue epi) {
  return GemvJob<kRows, RowPtrs, Epilogue>{in, n0, n1, k0, k1, rows, epi};
}

// A job's `rows(n, w)` sets w[r] to the start of weight row r of output n (r < kRows), and its
// `epi(t, n, v)` receives the kRows dot products of token t. k0 and k1 - k0 must be multiples of
// 8, the weight rows and activation rows 16-byte aligned (x and ld multiples of 4 floats), and the
// scratch at least gemv_min_scratch(k1 - k0, warps).
template <class Block, class Job>
EVT_HD void gemv_run(const Block& b, const Job& j) {
  constexpr int kRows = Job::kRows;
  const GemvInput& in = j.in;
  const int64_t n0 = j.n0, n1 = j.n1, k0 = j.k0, k1 = j.k1;
  constexpr int64_t outs = kGroupRows / kRows;
  const int64_t nwarps = gemv_warps(b);
  const GemvPlan p = gemv_plan<kRows>(static_cast<int>(nwarps), in.tokens, n0, n1, k0, k1);
  for (int64_t c0 = 0; c0 < in.tokens; c0 += p.chunk) {
    const int64_t count = min_of<int64_t>(p.chunk, in.tokens - c0);
    stage_tokens(b, in, p, c0, count, k0, k1);
    for (int64_t g0 = 0; g0 < p.groups; g0 += p.round) {
      const int64_t round = min_of<int64_t>(p.round, p.groups - g0);
      // Warp w takes the (group, column block) pairs [w N / W, (w + 1) N / W) of this round,
      // writing the sums of group i into slot i + w (distinct: a later warp starts no earlier).
      const int64_t total = round * p.blocks_k;
#if defined(__CUDA_ARCH__)
      const int64_t w = warp(b);
#else
      for (int64_t w = 0; w < nwarps; ++w)
#endif
      for (int64_t f = w * total / nwarps, end = (w + 1) * total / nwarps; f < end;) {
        const int64_t i = f / p.blocks_k, stop = min_of<int64_t>(end, (i + 1) * p.blocks_k);
        const int64_t first = n0 + (g0 + i) * outs, a = f - i * p.blocks_k, e = stop - i * p.blocks_k;
        float* slot = p.slots + (i + w) * kSlotFloats;
#if defined(__CUDA_ARCH__)
        if (count > 8) {
          mma_segment<kRows, 2>(p, count, k0, k1, first, n1, a, e, j.rows, slot);
        } else {
          mma_segment<kRows, 1>(p, count, k0, k1, first, n1, a, e, j.rows, slot);
        }
#else
        scalar_segment<kRows>(p, count, k0, k1, first, n1, a, e, j.rows, slot);
#endif
        f = stop;
      }
      b.sync();
      // (token, output) pairs, outputs fastest so that the epilogue's stores are contiguous.
      for (int64_t q = b.thread(); q < count * round * outs; q += b.threads()) {
        const int64_t t = q / (round * outs), i = q % (round * outs) / outs, o = q % outs;
        const int64_t n = n0 + (g0 + i) * outs + o;
        if (n >= n1) continue;
        float v[kRows] = {};
        for (int64_t u = 0; u < nwarps; ++u) {
          const int64_t ub = u * total / nwarps, ue = (u + 1) * total / nwarps;
          // Warp u holds a part of group i only if its run is not empty and meets the group's.
          if (ub == ue || ue <= i * p.blocks_k || ub >= (i + 1) * p.blocks_k) continue;
          const float* slot = p.slots + (i + u) * kSlotFloats;
          for (int r = 0; r < kRows; ++r) v[r] += slot[(o + r * outs) * kChunkTokens + t];
        }
        j.epi(c0 + t, n, v);
      }
      b.sync();  // the next round or chunk reuses the slots and the stage
    }
  }
}

// The prologue's half of gemv_run: before the tile waits for its input, pull into L2 the first
// kPrefetchBlocks column blocks of each warp's first group, the weights it will load first.
template <class Block, class Job>
EVT_HD void gemv_prefetch(const Block& b, const Job& j) {
#if defined(__CUDA_ARCH__)
  constexpr int kRows = Job::kRows;
  const int64_t n0 = j.n0, n1 = j.n1, k0 = j.k0, k1 = j.k1;
  const int64_t nwarps = gemv_warps(b), w = warp(b);
  const GemvPlan p = gemv_plan<kRows>(static_cast<int>(nwarps), j.in.tokens, n0, n1, k0, k1);
  const int64_t total = min_of<int64_t>(p.round, p.groups) * p.blocks_k, f = w * total / nwarps;
  const int r = lane(b);
  if (r >= kGroupRows || f >= (w + 1) * total / nwarps) return;
  const int64_t i = f / p.blocks_k, a = f - i * p.blocks_k;
  const uint16_t* row = group_row<kRows>(n0 + i * (kGroupRows / kRows), n1, r, j.rows);
  const int64_t begin = k0 + a * kBlockK, end = min_of<int64_t>(k1, begin + kPrefetchBlocks * kBlockK);
  if (row != nullptr && begin < end) {
    const uint32_t bytes = static_cast<uint32_t>(2 * (end - begin));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row + begin), "r"(bytes) : "memory");
  }
#else
  (void)b, (void)j;
#endif
}

// out = residual + x W^T over the rows [n0, n1): the projections that end the attention and MLP
// blocks. x is tokens x k (row stride k), W is rows x k, residual and out are tokens x width.
EVT_HD inline auto residual_job(const float* x, int64_t tokens, int64_t k, const uint16_t* w, int64_t n0, int64_t n1,
                                const float* residual, float* out, int64_t width) {
  return gemv_job<1>(
      GemvInput{.x = x, .ld = k, .tokens = tokens}, n0, n1, 0, k,
      [=](int64_t r, const uint16_t** p) { p[0] = w + r * k; },
      [=](int64_t t, int64_t r, const float* v) { out[t * width + r] = residual[t * width + r] + v[0]; });
}

}  // namespace evt::kernels::llm
