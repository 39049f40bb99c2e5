#pragma once
// The launch of a generated megakernel on CUDA, declared for host code; defined in
// cuda_launch.cuh and instantiated once per generated graph in a .cu file. Kept free of
// framework headers, which nvcc's front end does not take.

#include <cuda_runtime.h>

#include "runtime/megakernel/support.h"

namespace evt::mk {

template <class MK>
struct CudaLaunch {
  static constexpr int kThreads = 128;
  // How many blocks of the kernel fit on one SM at once (co-residency bound of the grid).
  static cudaError_t blocks_per_sm(int* blocks);
  // The megakernel under a schedule other than kKernels.
  static cudaError_t launch(const typename MK::ParamsType& p, const LaunchArgs& a, int blocks, Schedule schedule,
                            cudaStream_t stream);
  // Kernels mode: ordinary launch k of MK::launches(p), running the tiles of one task group
  // (of one layer, for a layered group).
  static cudaError_t launch_kernel(const typename MK::ParamsType& p, const LaunchArgs& a, int64_t k, int blocks,
                                   cudaStream_t stream);
};

}  // namespace evt::mk
