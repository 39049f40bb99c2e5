#pragma once
// The LLM tile bodies compiled by nvcc, each behind a __global__ runner, for the GPU test
// (llm_tiles_gpu_test.cc). Declared here for host code and defined in llm_tiles_cuda.cu; kept
// free of test-framework headers, which nvcc's front end does not take.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/tile_body.h"

namespace evt::testing::llm {

// One launch of a body: its buffers in the row's order, and the box of tiles it runs,
// first[k] + [0, extent[k]) for k < rank.
struct TileLaunch {
  static constexpr int kMaxBuffers = 12;  // moe_plan writes 9
  static constexpr int kMaxRank = 4;
  kernels::DevBuffer reads[kMaxBuffers];
  kernels::DevBuffer writes[kMaxBuffers];
  int64_t first[kMaxRank] = {};
  int64_t extent[kMaxRank] = {};
  int rank = 0;
};

struct CudaTileBody {
  const char* row;
  const char* body;  // spelled as the registry's device_body names it
  int num_reads, num_writes;
  // Runs every tile of the box on `blocks` blocks of cuda_block_threads() threads; a block takes
  // tiles in turn (grid-stride), as a megakernel worker does, so bodies that keep state in shared
  // memory meet it left over from the block's previous tile.
  cudaError_t (*launch)(const TileLaunch& launch, int blocks, cudaStream_t stream);
  // The same on the blocks of the megakernel's entry for steps of more than 16 tokens, whose
  // projection passes take several sets of 16 (kernels/llm/gemv.h); null for a body that runs no
  // projection.
  cudaError_t (*launch_wide)(const TileLaunch& launch, int blocks, cudaStream_t stream);
};

// The megakernel's block size (runtime/megakernel/cuda_launch.h).
int cuda_block_threads();
// nullptr when `row` has no CUDA entry.
const CudaTileBody* find_cuda_tile_body(const char* row);

}  // namespace evt::testing::llm
