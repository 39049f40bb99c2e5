#pragma once
// Scratch memory a tile body may use for the duration of its call: the block's dynamic shared
// memory on the GPU (sized per launch, at most LaunchShape::kScratchBytes), a per-thread buffer of
// kHostScratchBytes on the host. Nothing in it survives from one task to the next, since another
// task may run on the block in between.

#include <cstdint>
#include <memory>

#include "kernels/tile_body.h"

namespace evt::kernels {

inline constexpr int64_t kHostScratchBytes = int64_t{1} << 20;

struct Scratch {
  unsigned char* data;  // 16-byte aligned
  int64_t bytes;
};

EVT_HD inline Scratch block_scratch() {
#if defined(__CUDA_ARCH__)
  extern __shared__ __align__(16) unsigned char evt_block_scratch[];
  uint32_t bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return Scratch{evt_block_scratch, bytes};
#else
  struct alignas(16) Bytes {
    unsigned char b[kHostScratchBytes];
  };
  thread_local const std::unique_ptr<Bytes> buffer = std::make_unique<Bytes>();
  return Scratch{buffer->b, kHostScratchBytes};
#endif
}

}  // namespace evt::kernels
