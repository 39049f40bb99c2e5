#pragma once
// Definitions of CudaLaunch (cuda_launch.h): include from the .cu file that instantiates a graph.

#include <algorithm>

#include "kernels/weight_stream.h"
#include "runtime/megakernel/cuda_launch.h"
#include "runtime/megakernel/cuda_worker.cuh"

namespace evt::mk {

// Each block: the consumer threads run the megakernel's loop; the loader warp's lane 0, if the
// graph has weight streams, fills the ring for the same tasks. W: CudaWorker, or a WideCudaWorker.
template <class MK, int kConsumers, int kThreads, Schedule kS, class W = CudaWorker>
__global__ void __launch_bounds__(kThreads, 1)
    megakernel_entry(const __grid_constant__ typename MK::ParamsType p, const __grid_constant__ LaunchArgs a) {
  W w(kConsumers, a.ring_stages);
  w.init(a);
  if constexpr (MK::has_streams) {
    if (w.is_loader()) {
      if (threadIdx.x % 32 == 0) MK::template load<W, kS>(w, p, a);
      return;
    }
  }
  MK::template run<W, kS>(w, p, a);
}

// The static schedule's entry of wide passes, or (kPassSets 1) its only one.
template <class MK>
constexpr auto static_entry(bool wide) {
  using L = CudaLaunch<MK>;
  if constexpr (L::kPassSets > 1) {
    using Wide = WideCudaWorker<L::kPassSets, L::kConsumers>;
    if (wide) return &megakernel_entry<MK, L::kConsumers, L::kThreads, kStatic, Wide>;
  }
  return &megakernel_entry<MK, L::kConsumers, L::kThreads, kStatic>;
}

template <class MK, int kConsumers, int kThreads>
__global__ void __launch_bounds__(kThreads, 1)
    launch_entry(const __grid_constant__ typename MK::ParamsType p, const __grid_constant__ LaunchArgs a, int64_t k) {
  CudaWorker w(kConsumers, a.ring_stages);
  w.init(a);
  if constexpr (MK::has_streams) {
    if (w.is_loader()) {
      if (threadIdx.x % 32 == 0) MK::template load_one_launch<CudaWorker>(w, p, a, k);
      return;
    }
  }
  MK::run_one_launch(w, p, a, k);
}

template <class MK>
cudaError_t CudaLaunch<MK>::blocks_per_sm(int* blocks) {
  // The bound of every entry (static, its wide passes', dynamic and per-group megakernels, kernels
  // mode), each first allowed its dynamic shared memory: above 48 KiB it is opt-in per kernel.
  const void* entries[] = {
      reinterpret_cast<const void*>(static_entry<MK>(false)),
      reinterpret_cast<const void*>(static_entry<MK>(true)),
      reinterpret_cast<const void*>(megakernel_entry<MK, kConsumers, kThreads, kDynamic>),
      reinterpret_cast<const void*>(megakernel_entry<MK, kConsumers, kThreads, kPerGroup>),
      reinterpret_cast<const void*>(launch_entry<MK, kConsumers, kThreads>),
  };
  *blocks = 0;
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); ++i) {
    cudaError_t e = cudaFuncSetAttribute(entries[i], cudaFuncAttributeMaxDynamicSharedMemorySize, kDynamicBytes);
    if (e == cudaSuccess && smem_carveout() >= 0) {
      e = cudaFuncSetAttribute(entries[i], cudaFuncAttributePreferredSharedMemoryCarveout, smem_carveout());
    }
    int fit = 0;
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, entries[i], kThreads, kDynamicBytes);
    if (e != cudaSuccess) return e;
    *blocks = i == 0 || fit < *blocks ? fit : *blocks;
  }
  return cudaSuccess;
}

// A launch's arguments completed, for every entry alike: its shared memory laid out (the scratch
// it asks for, within what the kernel allows, 0 for the most; the weight ring in what is left, at
// most the stages it asks for, as ring_stage_cap() lets it) into `smem`, the dynamic shared memory
// bytes, and the launch knobs set (launch_knobs.cc). An error when a kernel with weight streams is
// left no ring stage.
template <class MK>
cudaError_t complete_launch_args(LaunchArgs& a, int& smem) {
  constexpr int most = CudaLaunch<MK>::kScratchBytes;
  const int scratch = a.scratch_bytes > 0 && a.scratch_bytes < most ? a.scratch_bytes : most;
  const int asked = a.ring_stages > 0 ? std::min(a.ring_stages, kMaxRingStages) : kDefaultRingStages;
  a.ring_stages = 0;
  if constexpr (MK::has_streams) {
    const int64_t fit = (CudaLaunch<MK>::kDynamicBytes - scratch) / kernels::kChunkBytes;
    a.ring_stages = static_cast<int>(std::min<int64_t>(fit, ring_stage_cap(kMaxRingStages, asked)));
  }
  smem = scratch + a.ring_stages * static_cast<int>(kernels::kChunkBytes);
  a.poll_ns = poll_ns();
  a.prefetch_in_flight = prefetch_in_flight();
  return MK::has_streams && a.ring_stages < 1 ? cudaErrorInvalidValue : cudaSuccess;
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch(const typename MK::ParamsType& params, const LaunchArgs& args, int blocks,
                                   Schedule schedule, bool wide, cudaStream_t stream) {
  typename MK::ParamsType p = params;
  MK::views(p);
  LaunchArgs a = args;
  int smem = 0;
  if (const cudaError_t e = complete_launch_args<MK>(a, smem); e != cudaSuccess) return e;
  switch (schedule) {
    case kDynamic:
      megakernel_entry<MK, kConsumers, kThreads, kDynamic><<<blocks, kThreads, smem, stream>>>(p, a);
      break;
    case kPerGroup:
      megakernel_entry<MK, kConsumers, kThreads, kPerGroup><<<blocks, kThreads, smem, stream>>>(p, a);
      break;
    default: static_entry<MK>(wide)<<<blocks, kThreads, smem, stream>>>(p, a); break;
  }
  return cudaGetLastError();
}

template <class MK>
cudaError_t CudaLaunch<MK>::launch_kernel(const typename MK::ParamsType& params, const LaunchArgs& args, int64_t k,
                                          int blocks, cudaStream_t stream) {
  typename MK::ParamsType p = params;
  MK::views(p);
  LaunchArgs a = args;
  int smem = 0;
  if (const cudaError_t e = complete_launch_args<MK>(a, smem); e != cudaSuccess) return e;
  launch_entry<MK, kConsumers, kThreads><<<blocks, kThreads, smem, stream>>>(p, a, k);
  return cudaGetLastError();
}

}  // namespace evt::mk
