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
    group_entry(const __grid_constant__ typename MK::ParamsType p, const LaunchArgs a, int group) {
  __shared__ uint64_t share_slots[2];
  CudaWorker w(share_slots);
  MK::run_one_group(w, p, a, group);
}

template <class MK>
cudaError_t CudaLaunch<MK>::blocks_per_sm(int* blocks) {
  // The dynamic kernel's resources bound both megakernels' (it holds the larger loop).
  int fit[2] = {};
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit[0], megakernel_entry<MK, kThreads, kStatic>, kThreads, 0);
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit[1], megakernel_entry<MK, kThreads, kDynamic>, kThreads, 0);
  }
  *blocks = fit[0] < fit[1] ? fit[0] : fit[1];
  return e;
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch(const typename MK::ParamsType& p, const LaunchArgs& a, int blocks, bool dynamic,
                                   cudaStream_t stream) {
  if (dynamic) {
    megakernel_entry<MK, kThreads, kDynamic><<<blocks, kThreads, 0, stream>>>(p, a);
  } else {
    megakernel_entry<MK, kThreads, kStatic><<<blocks, kThreads, 0, stream>>>(p, a);
  }
  return cudaGetLastError();
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch_group(const typename MK::ParamsType& p, const LaunchArgs& a, int group, int blocks,
                                         cudaStream_t stream) {
  group_entry<MK, kThreads><<<blocks, kThreads, 0, stream>>>(p, a, group);
  return cudaGetLastError();
}

}  // namespace evt::mk
