#pragma once
// The launch of a generated megakernel on CUDA, declared for host code; defined in
// cuda_launch.cuh and instantiated once per generated graph in a .cu file. Kept free of
// framework headers, which nvcc's front end does not take.

#include <cuda_runtime.h>

#include "runtime/megakernel/shared_memory.h"
#include "runtime/megakernel/support.h"

namespace evt::mk {

// The blocks of a generated megakernel's launches: the threads that run tasks, and the most
// dynamic shared memory its tile bodies use as scratch (kernels/block_scratch.h). Specialize it,
// in the .cu file that instantiates CudaLaunch, for a megakernel whose bodies are written for
// another shape.
// kPassSets > 1 adds an entry of the static schedule whose tile bodies' projection passes take
// up to that many sets of 16 tokens (WideCudaWorker, kernels/llm/gemv.h), for launch(wide).
template <class MK>
struct LaunchShape {
  static constexpr int kThreads = 128;
  static constexpr int kScratchBytes = 0;
  static constexpr int kPassSets = 1;
};

// The launch's tuning knobs (launch_knobs.cc), each read once: its default, or an environment
// variable that overrides it for measurements.
// The most stages a weight ring may take, up to `most`: EVT_RING_STAGES (1 to `most`), else
// `asked` (the launch's: kDefaultRingStages of shared_memory.h unless its caller asked for more or
// fewer).
int ring_stage_cap(int most, int asked);
// The sleep between two polls of a wait, ns: EVT_POLL_NS (0 to 100000), to measure what the
// pollers cost the memory system (a hundred SMs may poll one counter).
int poll_ns();
// The most fills a loader has in flight while it fills the ring for a task of the static order
// ahead of the consumers, 0 for no cap (launch_knobs.cc says why): EVT_PREFETCH_IN_FLIGHT (0 to 64).
int prefetch_in_flight();
// The shared memory carveout every entry asks for, percent of the most (0 leaves the most to L1,
// which caches the threads' stacks and spills): EVT_SMEM_CARVEOUT (0 to 100), or -1 for none.
int smem_carveout();
// Whether steps of many tokens run the static entry of wide passes (LaunchShape::kPassSets):
// EVT_WIDE_PASSES, 0 (never) or 1 (always), else -1 (the caller's rule).
int wide_passes();

template <class MK>
struct CudaLaunch {
  // Task threads, and the block: one more warp, the loader, when the graph has weight streams.
  static constexpr int kConsumers = LaunchShape<MK>::kThreads;
  static constexpr int kThreads = kConsumers + (MK::has_streams ? 32 : 0);
  static constexpr int kScratchBytes = LaunchShape<MK>::kScratchBytes;
  static constexpr int kPassSets = LaunchShape<MK>::kPassSets;
  // The weight ring takes what the scratch leaves, so a block with streams may use it all.
  static constexpr int kDynamicBytes = MK::has_streams ? kSharedMemoryLimit : kScratchBytes;
  // The kernel's arguments must fit the 32 KiB a launch passes (sm_70 and later).
  static_assert(sizeof(typename MK::ParamsType) + sizeof(LaunchArgs) + 8 <= 32764, "the megakernel's Params are too large");
  // How many blocks of the kernel fit on one SM at once (co-residency bound of the grid).
  static cudaError_t blocks_per_sm(int* blocks);
  // The megakernel under a schedule other than kKernels; with `wide`, the static schedule runs the
  // entry of wide passes (kPassSets > 1; else the argument is ignored).
  static cudaError_t launch(const typename MK::ParamsType& p, const LaunchArgs& a, int blocks, Schedule schedule,
                            bool wide, cudaStream_t stream);
  // Kernels mode: ordinary launch k of MK::launches(p), running the tiles of one task group
  // (of one layer, for a layered group).
  static cudaError_t launch_kernel(const typename MK::ParamsType& p, const LaunchArgs& a, int64_t k, int blocks,
                                   cudaStream_t stream);
};

}  // namespace evt::mk
