#pragma once
// The arithmetic that the sample row's body (sample.h) and its CPU reference (sample.cc) share, so
// that both choose the same token to the bit: the per-row parameter layout, the penalty, the
// random stream, and exp/log written out of single-rounded float operations. The libraries' expf
// and logf differ between the host and CUDA in their last bits; these do not.

#include <cmath>
#include <cstdint>

#include "kernels/llm/warp_ops.h"

namespace evt::kernels::llm {

// Words of one row of the i32 `samp` buffer (S x kSampleWords).
enum SampleWord : int {
  kSampleTemperature = 0,  // f32 bits; <= 0 (or NaN): greedy
  kSampleTopK,             // i32; <= 0 or >= V: off; 1: greedy
  kSampleTopP,             // f32 bits; >= 1 (or NaN): off
  kSampleMinP,             // f32 bits; <= 0 (or NaN): off; above 1 acts as 1
  kSamplePresence,         // f32 bits: subtracted once from each penalized token's logit
  kSampleFrequency,        // f32 bits: subtracted per occurrence
  kSampleSeedLo,           // the request's u64 seed, low and high halves
  kSampleSeedHi,
  kSampleCounter,          // u32: which token of its request is being drawn
  kSampleWords = 16,       // the row's width in the graph
};

struct SampleParams {
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1, min_p = 0, presence = 0, frequency = 0;
  uint64_t seed = 0;
  uint32_t counter = 0;
};

// Fills words[0, kSampleWords) for one row; the words past kSampleCounter are zero.
inline void pack_sample_row(const SampleParams& p, int32_t* words) {
  for (int w = 0; w < kSampleWords; ++w) words[w] = 0;
  words[kSampleTemperature] = f32_to_bits(p.temperature);
  words[kSampleTopK] = p.top_k;
  words[kSampleTopP] = f32_to_bits(p.top_p);
  words[kSampleMinP] = f32_to_bits(p.min_p);
  words[kSamplePresence] = f32_to_bits(p.presence);
  words[kSampleFrequency] = f32_to_bits(p.frequency);
  words[kSampleSeedLo] = static_cast<int32_t>(static_cast<uint32_t>(p.seed));
  words[kSampleSeedHi] = static_cast<int32_t>(static_cast<uint32_t>(p.seed >> 32));
  words[kSampleCounter] = static_cast<int32_t>(p.counter);
}

EVT_HD inline SampleParams unpack_sample_row(const int32_t* words) {
  SampleParams p;
  p.temperature = bits_to_f32(words[kSampleTemperature]);
  p.top_k = words[kSampleTopK];
  p.top_p = bits_to_f32(words[kSampleTopP]);
  p.min_p = bits_to_f32(words[kSampleMinP]);
  p.presence = bits_to_f32(words[kSamplePresence]);
  p.frequency = bits_to_f32(words[kSampleFrequency]);
  p.seed = static_cast<uint64_t>(static_cast<uint32_t>(words[kSampleSeedLo])) |
           static_cast<uint64_t>(static_cast<uint32_t>(words[kSampleSeedHi])) << 32;
  p.counter = static_cast<uint32_t>(words[kSampleCounter]);
  return p;
}

// Which filters a row turns on (NaN parameters turn them off).
EVT_HD inline bool is_greedy(const SampleParams& p) { return !(p.temperature > 0) || p.top_k == 1; }
EVT_HD inline bool top_k_on(const SampleParams& p, int64_t vocab) { return p.top_k > 0 && p.top_k < vocab; }
EVT_HD inline bool top_p_on(const SampleParams& p) { return p.top_p < 1; }
EVT_HD inline bool min_p_on(const SampleParams& p) { return p.min_p > 0; }

// What a penalized token's logit loses: presence + frequency * count, rounded after each step.
EVT_HD inline float penalty(const SampleParams& p, int32_t count) {
  return add_product(p.presence, p.frequency, static_cast<float>(count));
}

EVT_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);  // never fused into a following add
#else
  return a * b;
#endif
}

// ln 2 = kLn2Hi + kLn2Lo, kLn2Hi with 15 significant bits, so that k * kLn2Hi is exact for |k| < 512.
inline constexpr float kLn2Hi = 6.9314575195e-01f, kLn2Lo = 1.4286067653e-06f;

// e^x for x <= 0: x = k ln2 + r with |r| <= ln2 / 2 (Cody-Waite, ln2 split so that k * hi is
// exact), e^r by its Taylor series to r^7 (error below 3e-9), then scaled by 2^k. Within 2 ulp.
EVT_HD inline float sample_exp(float x) {
  if (!(x > -87.0f)) return 0.0f;  // e^-87 is near the smallest normal float
  constexpr float kLog2e = 1.44269504f;
  const float k = floorf(mul_rn(x, kLog2e) + 0.5f);
  const float r = add_product(add_product(x, k, -kLn2Hi), k, -kLn2Lo);
  constexpr float kInverseFactorials[] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
  float e = kInverseFactorials[0];
  EVT_UNROLL
  for (int n = 1; n < 8; ++n) e = add_product(kInverseFactorials[n], e, r);
  return mul_rn(e, bits_to_f32((static_cast<int32_t>(k) + 127) << 23));  // k in [-126, 0]
}

// log(x) for finite x > 0, as fdlibm's logf: x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)),
// f exact, and log(1 + f) = f - f^2 / 2 + s (f^2 / 2 + R) with s = f / (2 + f) and R the series
// of 2 atanh(s) - 2s in s^2 (|s| < 0.172; to s^10, error below 1e-9). Within 2 ulp.
EVT_HD inline float sample_log(float x) {
  int32_t bits = f32_to_bits(x);
  int e = 0;
  if (bits < 0x00800000) {  // subnormal: scale into the normal range first
    bits = f32_to_bits(mul_rn(x, 0x1p23f));
    e = -23;
  }
  e += (bits >> 23) - 127;
  float m = bits_to_f32((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  if (m > 1.41421356f) {
    m = mul_rn(m, 0.5f);
    ++e;
  }
  const float f = m - 1.0f;
  const float s = f / (2.0f + f), z = mul_rn(s, s);
  constexpr float kSeries[] = {2.0f / 11, 2.0f / 9, 2.0f / 7, 2.0f / 5, 2.0f / 3};
  float r = kSeries[0];
  EVT_UNROLL
  for (int n = 1; n < 5; ++n) r = add_product(kSeries[n], r, z);
  r = mul_rn(r, z);
  const float half_f2 = mul_rn(mul_rn(0.5f, f), f), ef = static_cast<float>(e);
  const float low = (half_f2 - add_product(mul_rn(ef, kLn2Lo), s, half_f2 + r)) - f;
  return add_product(-low, ef, kLn2Hi);
}

// The min-p threshold: m + log(min_p), min_p capped at 1 so that the maximum is always kept.
EVT_HD inline float min_p_threshold(float m, float min_p) { return m + sample_log(min_of(min_p, 1.0f)); }

// Top-p mass of a value z when the row's largest is m: e^(z - m) in 32-bit fixed point, so that
// the maximum weighs 2^32 and sums do not depend on their order.
EVT_HD inline uint64_t top_p_mass(float z, float m) {
  if (z == m) return uint64_t{1} << 32;  // also when both are infinite and z - m is NaN
  const float d = z - m;
  if (!(d >= -23.0f)) return 0;  // e^-23 * 2^32 < 1: the mass rounds to 0 anyway
  return static_cast<uint64_t>(mul_rn(sample_exp(d), 0x1p32f));
}

// The mass that the kept tokens must reach: ceil(top_p * total), at least 1 (top_p < 1).
EVT_HD inline uint64_t top_p_target(float top_p, uint64_t total) {
  const double t = ceil(static_cast<double>(top_p) * static_cast<double>(total));
  return t < 1 ? 1 : static_cast<uint64_t>(t);
}

// SplitMix64's output function (Steele, Lea and Flood, 2014).
EVT_HD constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The random stream of one draw: a function of the request's seed and of which of its tokens is
// drawn, and of nothing else in the batch.
EVT_HD constexpr uint64_t draw_stream(uint64_t seed, uint32_t counter) {
  return splitmix64(seed ^ splitmix64(counter));
}

// Gumbel noise of token i in a draw: -log(-log(u)) with u = b / 2^24 for 24 hash bits b (b = 0
// taken as 1/2), so u lies in (0, 1) and is exact in a float.
EVT_HD inline float gumbel(uint64_t stream, int64_t i) {
  // Token i's word of the SplitMix64 sequence that starts at `stream`.
  const uint64_t word = splitmix64(stream + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
  const uint32_t b = static_cast<uint32_t>(word >> 40);
  const float u = mul_rn(b == 0 ? 0.5f : static_cast<float>(b), 0x1p-24f);
  return -sample_log(-sample_log(u));
}

}  // namespace evt::kernels::llm
