#pragma once
// Scratch memory a tile body may use for the duration of its call, which its block hands out as
// b.scratch(): on the GPU the block's dynamic shared memory past the weight ring (sized per
// launch), on the host a per-thread buffer of kHostScratchBytes. Nothing in it survives from one
// task to the next, since another task may run on the block in between.

#include <cstdint>
#include <memory>

#include "kernels/hd.h"
#include "kernels/weight_stream.h"

namespace evt::kernels {

inline constexpr int64_t kHostScratchBytes = int64_t{1} << 20;

struct Scratch {
  unsigned char* data;  // 16-byte aligned
  int64_t bytes;
};

#if defined(__CUDACC__)
// The whole of the block's dynamic shared memory.
__device__ inline Scratch dynamic_shared_memory() {
  extern __shared__ __align__(128) unsigned char evt_dynamic_smem[];
  uint32_t bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return Scratch{evt_dynamic_smem, bytes};
}
#endif

// The host's blocks: scratch, and the buffer their stream readers copy chunks into.
inline Scratch host_scratch() {
  struct alignas(16) Bytes {
    unsigned char b[kHostScratchBytes];
  };
  thread_local const std::unique_ptr<Bytes> buffer = std::make_unique<Bytes>();
  return Scratch{buffer->b, kHostScratchBytes};
}
inline unsigned char* host_chunk_buffer() {
  struct alignas(16) Bytes {
    unsigned char b[kChunkBytes];
  };
  thread_local const std::unique_ptr<Bytes> buffer = std::make_unique<Bytes>();
  return buffer->b;
}

}  // namespace evt::kernels
