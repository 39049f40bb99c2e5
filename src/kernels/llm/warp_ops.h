#pragma once
// Warp-level building blocks of the LLM tile bodies, written once for both compilers. On the GPU
// a block is warps of 32 lanes that reduce with shuffles; the host's blocks have one thread,
// which is then one warp of one lane, and every reduction is the identity. A body written
// against lanes()/lane()/warp()/warps() therefore runs unchanged in the CPU backend.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/tile_body.h"

namespace evt::kernels::llm {

EVT_HD constexpr int lanes() {
#if defined(__CUDA_ARCH__)
  return 32;
#else
  return 1;
#endif
}

template <class Block>
EVT_HD int lane(const Block& b) {
  return b.thread() % lanes();
}
template <class Block>
EVT_HD int warp(const Block& b) {
  return b.thread() / lanes();
}
template <class Block>
EVT_HD int warps(const Block& b) {
  return b.threads() / lanes();
}

// Orders the shared-memory accesses of one warp's lanes.
EVT_HD inline void warp_sync() {
#if defined(__CUDA_ARCH__)
  __syncwarp();
#endif
}

EVT_HD inline float warp_sum(float v) {
#if defined(__CUDA_ARCH__)
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
#endif
  return v;
}

EVT_HD inline double warp_sum(double v) {
#if defined(__CUDA_ARCH__)
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
#endif
  return v;
}

// Lane `src`'s v, to every lane of the warp (which all call it with the same src). On the host
// (one lane) src is 0.
EVT_HD inline int32_t warp_broadcast(int32_t v, int src) {
#if defined(__CUDA_ARCH__)
  return __shfl_sync(0xffffffffu, v, src);
#else
  (void)src;
  return v;
#endif
}

EVT_HD inline float warp_max(float v) {
#if defined(__CUDA_ARCH__)
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
#endif
  return v;
}

EVT_HD inline float bf16_to_f32(uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
#else
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
#endif
}

// Round to nearest even, as torch's .to(torch.bfloat16) (NaN stays a quiet NaN). The GPU's
// conversion instruction rounds the same way (a NaN becomes the canonical one): one instruction
// where the integer rounding below is six.
EVT_HD inline uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
#endif
}

EVT_HD inline float bits_to_f32(int32_t bits) {
  float f;
#if defined(__CUDA_ARCH__)
  f = __int_as_float(bits);
#else
  std::memcpy(&f, &bits, 4);
#endif
  return f;
}

EVT_HD inline int32_t f32_to_bits(float f) {
  int32_t bits;
#if defined(__CUDA_ARCH__)
  bits = __float_as_int(f);
#else
  std::memcpy(&bits, &f, 4);
#endif
  return bits;
}

// A u32 key that orders like the (non-NaN) float, with -0 and +0 on one key as they compare equal.
EVT_HD inline uint32_t order_key(float z) {
  const uint32_t bits = static_cast<uint32_t>(f32_to_bits(z == 0.0f ? 0.0f : z));
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// An add to a word of the block's shared memory that other threads add to at the same time.
EVT_HD inline void shared_add(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  *p += v;
#endif
}
EVT_HD inline void shared_add(int32_t* p, int32_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(p, v);
#else
  *p += v;
#endif
}

// 16 bytes from global memory into shared memory (`copy`), or 16 zero bytes; both 16-byte aligned.
// On the GPU by cp.async, which passes no registers, so a thread issues all of its copies before
// any lands (a load into registers waits for its value before the store can go); they have landed,
// for the issuing thread, once copy16_wait_all() returns.
EVT_HD inline void copy16_to_shared(void* dst, const void* src, bool copy) {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(copy ? 16 : 0)
               : "memory");
#else
  if (copy) {
    std::memcpy(dst, src, 16);
  } else {
    std::memset(dst, 0, 16);
  }
#endif
}
EVT_HD inline void copy16_wait_all() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Eight consecutive bf16 values as they lie in memory: one 16-byte load on the GPU (`p` 16-byte
// aligned), widened by unpack8_bf16 when used, so that a load in flight holds four registers.
struct Bf16x8 {
  uint32_t w[4];
};
EVT_HD inline Bf16x8 load_bf16x8(const uint16_t* p) {
  Bf16x8 v;
#if defined(__CUDA_ARCH__)
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  v.w[0] = u.x, v.w[1] = u.y, v.w[2] = u.z, v.w[3] = u.w;
#else
  for (int i = 0; i < 4; ++i) v.w[i] = uint32_t{p[2 * i]} | uint32_t{p[2 * i + 1]} << 16;
#endif
  return v;
}
EVT_HD inline void unpack8_bf16(const Bf16x8& v, float* out) {
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bits_to_f32(static_cast<int32_t>(v.w[i] << 16));
    out[2 * i + 1] = bits_to_f32(static_cast<int32_t>(v.w[i] & 0xffff0000u));
  }
}
// ... as floats at once.
EVT_HD inline void load8_bf16(const uint16_t* p, float* out) { unpack8_bf16(load_bf16x8(p), out); }

// n consecutive bf16 values as floats (n even; `p` 4-byte aligned): 4-byte loads on the GPU.
template <int n>
EVT_HD inline void load_bf16s(const uint16_t* p, float* out) {
#if defined(__CUDA_ARCH__)
#pragma unroll
  for (int i = 0; i < n / 2; ++i) {
    const uint32_t w = reinterpret_cast<const uint32_t*>(p)[i];
    out[2 * i] = __uint_as_float(w << 16);
    out[2 * i + 1] = __uint_as_float(w & 0xffff0000u);
  }
#else
  for (int i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
#endif
}

#if defined(__CUDA_ARCH__)
// Two floats as bf16 (round to nearest even) in one conversion, x0 in the low half.
__device__ inline uint32_t pack_bf16x2(float x0, float x1) {
  uint32_t w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(x1), "f"(x0));
  return w;
}
#endif

// Rounds eight floats to bf16 and stores them: one 16-byte store on the GPU (`p` 16-byte aligned).
EVT_HD inline void store_bf16x8(uint16_t* p, const float* v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(p) = make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]),
                                            pack_bf16x2(v[6], v[7]));
#else
  for (int i = 0; i < 8; ++i) p[i] = f32_to_bf16(v[i]);
#endif
}

// Eight consecutive floats: two 16-byte loads on the GPU (`p` 16-byte aligned) rather than the
// eight scalar loads the compiler emits when it cannot prove the alignment.
EVT_HD inline void load8_f32(const float* p, float* out) {
#if defined(__CUDA_ARCH__)
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
#else
  for (int i = 0; i < 8; ++i) out[i] = p[i];
#endif
}

// Stores eight floats: two 16-byte stores on the GPU (`p` 16-byte aligned).
EVT_HD inline void store8_f32(float* p, const float* v) {
#if defined(__CUDA_ARCH__)
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
#else
  for (int i = 0; i < 8; ++i) p[i] = v[i];
#endif
}

// Sums of a value over the lanes of a warp: over the lanes below `lane`, and over all of them.
struct LaneSums {
  uint64_t below, total;
};
EVT_HD inline LaneSums warp_lane_sums(uint64_t v, int lane) {
  uint64_t upto = v;  // this lane and those below
#if defined(__CUDA_ARCH__)
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint64_t lower = __shfl_up_sync(0xffffffffu, upto, offset);
    if (lane >= offset) upto += lower;
  }
  return LaneSums{upto - v, __shfl_sync(0xffffffffu, upto, 31)};
#else
  (void)lane;
  return LaneSums{0, upto};
#endif
}

// Lane i's predicate as bit i, to every lane (the host's one lane: bit 0).
EVT_HD inline uint32_t warp_ballot(bool pred) {
#if defined(__CUDA_ARCH__)
  return __ballot_sync(0xffffffffu, pred);
#else
  return pred ? 1u : 0u;
#endif
}
// The lanes of the warp whose v equals this lane's, as a mask (match.any); on the host's one-lane
// warp, the lane itself.
EVT_HD inline uint32_t warp_match(int32_t v) {
#if defined(__CUDA_ARCH__)
  return __match_any_sync(0xffffffffu, v);
#else
  (void)v;
  return 1u;
#endif
}

EVT_HD inline int bit_count(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return std::popcount(v);
#endif
}

// The largest and the smallest of the lanes' values, to every lane: one redux.sync each.
EVT_HD inline uint32_t warp_max(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __reduce_max_sync(0xffffffffu, v);
#else
  return v;
#endif
}
EVT_HD inline int32_t warp_min(int32_t v) {
#if defined(__CUDA_ARCH__)
  return __reduce_min_sync(0xffffffffu, v);
#else
  return v;
#endif
}

// e^x where a few ulps do not matter (softmax weights, SiLU): on the GPU a multiply and one
// ex2.approx.ftz (as __expf, within 2 + 1.17 |x| ulps by CUDA's documentation: 1.2e-5 relative at
// |x| = 88, against the tests' 1e-4; results below 2^-126 become 0), where expf inlines eight
// instructions into every unrolled row and head. The host's expf stays the reference.
EVT_HD inline float approx_exp(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
#else
  return expf(x);
#endif
}

// exp(m - max) with exp(-inf - -inf) = 0: the weight of an online-softmax state whose running
// max is m, rescaled to the running max `max` (an empty state has m = -inf and weighs nothing).
EVT_HD inline float softmax_rescale(float m, float max) { return m == -INFINITY ? 0.0f : approx_exp(m - max); }

EVT_HD inline float silu(float g) { return g / (1.0f + approx_exp(-g)); }

#if defined(__CUDA_ARCH__)
// d += a b for one 16 x 8 x 16 tile: a holds rows (g, g+8) x k (2c, 2c+1, 2c+8, 2c+9) of lane
// (g = lane / 4, c = lane % 4), b holds k (2c, 2c+1, 2c+8, 2c+9) of column g; d holds rows
// (g, g+8) x columns (2c, 2c+1). A register holds two bf16, the lower k in its low half.
__device__ inline void mma_bf16(float* d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x = hi + lo with about 16 significant bits, two bf16 each: an MMA of bf16 operands then
// multiplies f32 values to ~1e-5 relative in two MMAs instead of one at bf16's 4e-3.
__device__ inline void split_bf16x2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = pack_bf16x2(x0, x1);
  lo = pack_bf16x2(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
}
#endif

}  // namespace evt::kernels::llm
