#pragma once
// Bulk copies global -> shared memory (cp.async.bulk, the copy engine of sm_90) under an L2 cache
// policy, completing on an mbarrier in shared memory: the weight ring's fills and decode
// attention's V rows. Sizes and both addresses are multiples of 16 bytes.

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda/ptx>

namespace evt::kernels {

__device__ inline uint32_t shared_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// `bytes` from `src` to `dst`, counted against `bar`'s expected transaction bytes.
__device__ inline void copy_bulk(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar)), "l"(policy)
      : "memory");
}

// A barrier that one thread arms for each round of copies: init_copy_barrier once, then per round
// expect_copy_bytes (the round's total) before its copies and wait_copies(bar, phase) after them,
// phase 0, 1, 0, ... And inval_copy_barrier before the memory serves anything else.
__device__ inline void init_copy_barrier(uint64_t* bar) {
  cuda::ptx::mbarrier_init(bar, 1);
  // The copy engine (the async proxy) must see the initialized barrier.
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}
__device__ inline void expect_copy_bytes(uint64_t* bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared, bar,
                                       bytes);
}
// Until the round's bytes have landed. A copy that never lands is a bug (a bad address faults
// the copy, and the barrier then never completes): after about a second, trap rather than hang.
__device__ inline void wait_copies(uint64_t* bar, uint32_t phase) {
  for (uint32_t tries = 0; !cuda::ptx::mbarrier_try_wait_parity(bar, phase); ++tries) {
    if (tries == (1u << 20)) __trap();
  }
}
__device__ inline void inval_copy_barrier(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(shared_address(bar)) : "memory");
}
// Orders this thread's earlier shared-memory accesses before later bulk copies into the same
// memory (the copies write through the async proxy).
__device__ inline void fence_proxy_async_shared() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }

}  // namespace evt::kernels
#endif
