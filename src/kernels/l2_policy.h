#pragma once
// L2 cache policies for data a decode step reads once: the weights and the KV cache.
//
// A step streams every weight once at up to 4.5 TB/s, which under the default policy can replace
// the whole 50 MB L2 every ~11 us, and with it what the step reads again: the megakernel's code,
// the activations, the event counters, the partial sums. Loads made under an evict-first policy
// bring their lines in as the first to be evicted, leaving the rest of the L2 in place. Measured
// on the step, not reload by reload (H200: 0.6B B = 1 -16.7%, 8B -11.3%;
// bench/results/l2_evict_first_ab_h200_39a3b64.json).

#include <cstdint>

#if defined(__CUDACC__)
namespace evt::kernels {

// A policy under which every line a load brings in is evicted first (one instruction: make it
// once before a loop rather than per load).
__device__ inline uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// 16 bytes global -> registers under `policy` (`p` 16-byte aligned).
__device__ inline uint4 load16(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

}  // namespace evt::kernels
#endif
