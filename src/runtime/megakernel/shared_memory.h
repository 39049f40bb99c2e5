#pragma once
// How a megakernel block's dynamic shared memory is shared out: the tile bodies' scratch, and the
// weight ring in what the scratch leaves (cuda_launch.cuh). Host-only code plans with these too
// (model/decode_plan.cc picks the scratch a step asks for), so this header includes nothing of CUDA.

#include "kernels/weight_stream.h"

namespace evt::mk {

// What a block may hold in dynamic shared memory on sm_90 (227 KiB), less room for the kernel's
// static shared memory (the worker's words, WorkerShared, and the sample task's): with 223 KiB
// dynamic, an H200 takes at most 4,096 bytes static and refuses the launch bound above it
// (cudaFuncSetAttribute, in blocks_per_sm). cuobjdump's SHARED for the decode entries (4,864
// bytes) counts more than the runtime does: entries it gave 4,480 bytes fitted, where a probe
// kernel declaring 4,480 bytes was refused. So the headroom left is not known to the byte.
inline constexpr int kSharedMemoryLimit = 223 * 1024;

// The most stages of kernels::kChunkBytes a weight ring takes unless EVT_RING_STAGES says
// otherwise (ring_stage_cap, cuda_launch.h; launch_knobs.cc says why 4).
inline constexpr int kDefaultRingStages = 4;

// The scratch that leaves a block's weight ring `stages` stages.
constexpr int64_t scratch_leaving_stages(int stages) {
  return kSharedMemoryLimit - int64_t{stages} * kernels::kChunkBytes;
}

}  // namespace evt::mk
