#pragma once
// The weight ring of a CUDA block (kernels/weight_stream.h): `stages` chunks of shared memory at
// the start of its dynamic shared memory, which the block's loader warp fills with bulk copies
// while its consumer warps run tasks (CudaWorker, cuda_worker.cuh).
//
// Each stage has two mbarriers. `full` completes when a fill's bytes have landed (the loader
// arrives once with the byte count, the copies complete the transaction); `empty` completes when
// every consumer warp has released the chunk. Fill k of a stage (k = ticket / stages) waits for
// empty's phase k - 1 and is awaited on full's phase k. Loader and consumers each count tickets
// over the whole launch, so tasks need no hand-off: the loader runs ahead, by as many chunks as
// the ring holds, over the same sequence of tasks the consumers run.
//
// Where the consumers' task sequence is not known in advance (dynamic scheduling), the block's
// leader announces each task in a small mailbox before its body needs the weights, and the loader
// follows the announcements.

#include <cuda/atomic>
#include <cuda/ptx>

#include "kernels/bulk_copy.h"
#include "kernels/l2_policy.h"
#include "kernels/weight_stream.h"

namespace evt::mk {

inline constexpr int kMaxRingStages = 12;
inline constexpr int kMailboxSlots = 4;

// The ring's control words, in the block's static shared memory.
struct RingState {
  uint64_t full[kMaxRingStages];
  uint64_t empty[kMaxRingStages];
  int64_t mailbox[kMailboxSlots];  // announced tasks (task_id) or kAnnounceStop
  uint32_t posted, taken;          // announcements made and read
};

__device__ inline cuda::atomic_ref<uint32_t, cuda::thread_scope_block> block_word(uint32_t& w) {
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_block>(w);
}

// One thread, before any other touches the ring; the block synchronizes after it.
__device__ inline void init_ring(RingState& r, int stages, int consumer_warps) {
  for (int s = 0; s < stages; ++s) {
    cuda::ptx::mbarrier_init(&r.full[s], 1);
    cuda::ptx::mbarrier_init(&r.empty[s], static_cast<uint32_t>(consumer_warps));
  }
  r.posted = r.taken = 0;
  // The copy engine (the async proxy) must see the initialized barriers.
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}

// Whether phase `parity` of the barrier has completed (one bounded hardware wait).
__device__ inline bool phase_done(uint64_t* barrier, uint32_t parity) {
  return cuda::ptx::mbarrier_try_wait_parity(barrier, parity);
}

// The loader's fill of the cursor's next chunk into `stage`: the byte count on `full`, then one
// bulk copy per contiguous piece (16-byte aligned, multiples of 16 bytes: whole weight tiles),
// evict-first (kernels/l2_policy.h says why).
__device__ inline void fill_stage(kernels::StreamCursor& cursor, unsigned char* stage, uint64_t* full) {
  kernels::expect_copy_bytes(full, cursor.chunk_bytes());
  const uint64_t policy = kernels::evict_first_policy();
  cursor.next([&](const unsigned char* src, uint32_t bytes, uint32_t at) {
    kernels::copy_bulk(stage + at, src, bytes, full, policy);
  });
}

// A consumer warp is done reading a stage: one arrival per warp, after all its lanes' reads.
__device__ inline void release_stage(uint64_t* empty) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) cuda::ptx::mbarrier_arrive(empty);
}

}  // namespace evt::mk
