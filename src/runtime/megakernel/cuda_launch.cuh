#pragma once
// Definitions of CudaLaunch (cuda_launch.h): include from the .cu file that instantiates a graph.

#include "runtime/megakernel/cuda_launch.h"
#include "runtime/megakernel/cuda_worker.cuh"

namespace evt::mk {

template <class MK, int kThreads, Schedule kS>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel_entry(const __grid_constant__ typename MK::ParamsType p, const LaunchArgs a) {
  __shared__ uint64_t share_slots[2];
  CudaWorker w(share_slots);
  MK::template run<CudaWorker, kS>(w, p, a);
}

template <class MK, int kThreads>
__global__ void __launch_bounds__(kThreads, 1)
    launch_entry(const __grid_constant__ typename MK::ParamsType p, const LaunchArgs a, int64_t k) {
  __shared__ uint64_t share_slots[2];
  CudaWorker w(share_slots);
  MK::run_one_launch(w, p, a, k);
}

template <class MK>
cudaError_t CudaLaunch<MK>::blocks_per_sm(int* blocks) {
  // The bound of all four entries (static, dynamic and per-group megakernels, kernels mode), each
  // first allowed the scratch: above 48 KiB dynamic shared memory is opt-in per kernel.
  const void* entries[] = {
      reinterpret_cast<const void*>(megakernel_entry<MK, kThreads, kStatic>),
      reinterpret_cast<const void*>(megakernel_entry<MK, kThreads, kDynamic>),
      reinterpret_cast<const void*>(megakernel_entry<MK, kThreads, kPerGroup>),
      reinterpret_cast<const void*>(launch_entry<MK, kThreads>),
  };
  *blocks = 0;
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); ++i) {
    cudaError_t e = cudaFuncSetAttribute(entries[i], cudaFuncAttributeMaxDynamicSharedMemorySize, kScratchBytes);
    int fit = 0;
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, entries[i], kThreads, kScratchBytes);
    if (e != cudaSuccess) return e;
    *blocks = i == 0 || fit < *blocks ? fit : *blocks;
  }
  return cudaSuccess;
}

// The scratch a launch asks for, within what the kernel was allowed (blocks_per_sm()).
inline int launch_scratch(const LaunchArgs& a, int most) {
  return a.scratch_bytes > 0 && a.scratch_bytes < most ? a.scratch_bytes : most;
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch(const typename MK::ParamsType& p, const LaunchArgs& a, int blocks,
                                   Schedule schedule, cudaStream_t stream) {
  const int scratch = launch_scratch(a, kScratchBytes);
  switch (schedule) {
    case kDynamic: megakernel_entry<MK, kThreads, kDynamic><<<blocks, kThreads, scratch, stream>>>(p, a); break;
    case kPerGroup: megakernel_entry<MK, kThreads, kPerGroup><<<blocks, kThreads, scratch, stream>>>(p, a); break;
    default: megakernel_entry<MK, kThreads, kStatic><<<blocks, kThreads, scratch, stream>>>(p, a); break;
  }
  return cudaGetLastError();
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch_kernel(const typename MK::ParamsType& p, const LaunchArgs& a, int64_t k, int blocks,
                                          cudaStream_t stream) {
  launch_entry<MK, kThreads><<<blocks, kThreads, launch_scratch(a, kScratchBytes), stream>>>(p, a, k);
  return cudaGetLastError();
}

}  // namespace evt::mk
