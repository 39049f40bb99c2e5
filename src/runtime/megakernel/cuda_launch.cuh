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
  // The bound of all three megakernels (static, dynamic, per-group).
  int fit[3] = {};
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit[0], megakernel_entry<MK, kThreads, kStatic>, kThreads, 0);
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit[1], megakernel_entry<MK, kThreads, kDynamic>, kThreads, 0);
  }
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit[2], megakernel_entry<MK, kThreads, kPerGroup>, kThreads, 0);
  }
  *blocks = fit[0];
  for (int f : fit) *blocks = f < *blocks ? f : *blocks;
  return e;
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch(const typename MK::ParamsType& p, const LaunchArgs& a, int blocks,
                                   Schedule schedule, cudaStream_t stream) {
  switch (schedule) {
    case kDynamic: megakernel_entry<MK, kThreads, kDynamic><<<blocks, kThreads, 0, stream>>>(p, a); break;
    case kPerGroup: megakernel_entry<MK, kThreads, kPerGroup><<<blocks, kThreads, 0, stream>>>(p, a); break;
    default: megakernel_entry<MK, kThreads, kStatic><<<blocks, kThreads, 0, stream>>>(p, a); break;
  }
  return cudaGetLastError();
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch_kernel(const typename MK::ParamsType& p, const LaunchArgs& a, int64_t k, int blocks,
                                          cudaStream_t stream) {
  launch_entry<MK, kThreads><<<blocks, kThreads, 0, stream>>>(p, a, k);
  return cudaGetLastError();
}

}  // namespace evt::mk
