#pragma once
// Definitions of CudaLaunch (cuda_launch.h): include from the .cu file that instantiates a graph.

#include "runtime/megakernel/cuda_launch.h"
#include "runtime/megakernel/cuda_worker.cuh"

namespace evt::mk {

template <class MK, int kThreads>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel_entry(const __grid_constant__ typename MK::ParamsType p, const LaunchArgs a, bool dynamic) {
  __shared__ uint64_t share_slot;
  CudaWorker w(&share_slot);
  MK::run(w, p, a, dynamic);
}

template <class MK, int kThreads>
__global__ void __launch_bounds__(kThreads, 1)
    group_entry(const __grid_constant__ typename MK::ParamsType p, const LaunchArgs a, int group) {
  __shared__ uint64_t share_slot;
  CudaWorker w(&share_slot);
  MK::run_one_group(w, p, a, group);
}

template <class MK>
cudaError_t CudaLaunch<MK>::blocks_per_sm(int* blocks) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, megakernel_entry<MK, kThreads>, kThreads, 0);
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch(const typename MK::ParamsType& p, const LaunchArgs& a, int blocks, bool dynamic,
                                   cudaStream_t stream) {
  megakernel_entry<MK, kThreads><<<blocks, kThreads, 0, stream>>>(p, a, dynamic);
  return cudaGetLastError();
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch_group(const typename MK::ParamsType& p, const LaunchArgs& a, int group, int blocks,
                                         cudaStream_t stream) {
  group_entry<MK, kThreads><<<blocks, kThreads, 0, stream>>>(p, a, group);
  return cudaGetLastError();
}

}  // namespace evt::mk
