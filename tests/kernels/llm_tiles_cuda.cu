// The CUDA side of the LLM tile test: one grid-stride runner per body, on blocks of the
// megakernel's size.

#include <cstring>

#include "kernels/llm/attention_merge.h"
#include "kernels/llm/decode_attention.h"
#include "kernels/llm/down_proj.h"
#include "kernels/llm/embed_gather.h"
#include "kernels/llm/final_norm.h"
#include "kernels/llm/gate_up_silu.h"
#include "kernels/llm/lm_head.h"
#include "kernels/llm/o_proj.h"
#include "kernels/llm/qkv_finish.h"
#include "kernels/llm/qkv_proj.h"
#include "kernels/llm/sample.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm_tiles_cuda.h"

namespace evt::testing::llm {
namespace {

using kernels::DevBuffer;

// The decode megakernel's block (LaunchShape in src/model/decode_megakernel_d*.cu).
constexpr int kThreads = kernels::llm::kDecodeThreads;
constexpr int kScratchBytes = kernels::llm::kDecodeScratchBytes;

// The tile-body block interface (tile_body.h) on a CUDA block.
struct CudaBlock {
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int threads() const { return static_cast<int>(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
};

template <class Body>
__global__ void __launch_bounds__(kThreads) run_tiles(const TileLaunch launch) {
  int64_t total = 1;
  for (int k = 0; k < launch.rank; ++k) total *= launch.extent[k];
  // n is the same for every thread of the block, so the bodies' barriers are reached by all.
  for (int64_t n = blockIdx.x; n < total; n += gridDim.x) {
    int64_t tile[TileLaunch::kMaxRank] = {};
    int64_t rest = n;
    for (int k = launch.rank - 1; k >= 0; --k) {
      tile[k] = launch.first[k] + rest % launch.extent[k];
      rest /= launch.extent[k];
    }
    Body::run(CudaBlock{}, tile, launch.reads, launch.writes);
  }
}

template <class Body>
cudaError_t launch_tiles(const TileLaunch& launch, int blocks, cudaStream_t stream) {
  const cudaError_t e = cudaFuncSetAttribute(run_tiles<Body>, cudaFuncAttributeMaxDynamicSharedMemorySize, kScratchBytes);
  if (e != cudaSuccess) return e;
  run_tiles<Body><<<blocks, kThreads, kScratchBytes, stream>>>(launch);
  return cudaGetLastError();
}

// A body as a type: the kernel template takes it by type rather than by function pointer, so the
// host never needs the __host__ __device__ body instantiated for a block whose methods are
// __device__ only.
#define EVT_LLM_BODY(tag, row_name, body_fn, reads, writes)                                                       \
  struct tag {                                                                                                    \
    static constexpr const char* kRow = row_name;                                                                 \
    static constexpr const char* kBody = #body_fn;                                                                \
    static constexpr int kReads = reads, kWrites = writes;                                                        \
    static_assert(kReads <= TileLaunch::kMaxBuffers && kWrites <= TileLaunch::kMaxBuffers);                       \
    __device__ static void run(const CudaBlock& b, const int64_t* tile, const DevBuffer* r, const DevBuffer* w) { \
      body_fn(b, tile, r, w);                                                                                     \
    }                                                                                                             \
  };

#include "kernels/llm_tile_bodies.inc"
#undef EVT_LLM_BODY

template <class B>
constexpr CudaTileBody entry() {
  return CudaTileBody{B::kRow, B::kBody, B::kReads, B::kWrites, &launch_tiles<B>};
}

const CudaTileBody kBodies[] = {
#define EVT_LLM_BODY(tag, row, body, reads, writes) entry<tag>(),
#include "kernels/llm_tile_bodies.inc"
#undef EVT_LLM_BODY
};

}  // namespace

int cuda_block_threads() { return kThreads; }

const CudaTileBody* find_cuda_tile_body(const char* row) {
  for (const CudaTileBody& b : kBodies) {
    if (std::strcmp(b.row, row) == 0) return &b;
  }
  return nullptr;
}

}  // namespace evt::testing::llm
