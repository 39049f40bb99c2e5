// The CUDA side of the LLM tile test: one grid-stride runner per body, on blocks of the
// megakernel's size.

#include <algorithm>
#include <cstring>
#include <string_view>

#include "kernels/llm/attention_merge.h"
#include "kernels/llm/decode_attention.h"
#include "kernels/llm/down_proj.h"
#include "kernels/llm/embed_gather.h"
#include "kernels/llm/gate_up_silu.h"
#include "kernels/llm/lm_head.h"
#include "kernels/llm/moe_combine_residual.h"
#include "kernels/llm/moe_expert_down.h"
#include "kernels/llm/moe_expert_gate_up.h"
#include "kernels/llm/moe_plan.h"
#include "kernels/llm/moe_router.h"
#include "kernels/llm/o_proj.h"
#include "kernels/llm/qkv_finish.h"
#include "kernels/llm/qkv_proj.h"
#include "kernels/llm/sample.h"
#include "kernels/llm/decode_config.h"
#include "kernels/llm_tiles_cuda.h"
#include "runtime/megakernel/cuda_launch.h"
#include "runtime/megakernel/cuda_worker.cuh"

namespace evt::testing::llm {
namespace {

using kernels::DevBuffer;

// The decode megakernel's block (LaunchShape in src/model/decode_megakernel_d*.cu): its consumer
// threads and a loader warp, with the ring in the shared memory the most scratch leaves, as
// complete_launch_args (cuda_launch.cuh) lays it out.
constexpr int kThreads = kernels::llm::kDecodeThreads;
constexpr int kScratchBytes = kernels::llm::kDecodeScratchBytes;
constexpr int kRingStages = std::min<int>(mk::kDefaultRingStages, (mk::kSharedMemoryLimit - kScratchBytes) /
                                                                      static_cast<int>(kernels::kChunkBytes));
constexpr int kSharedBytes = kScratchBytes + kRingStages * static_cast<int>(kernels::kChunkBytes);

// The tile-body block interface on a CudaWorker, as the generated megakernels give it.
struct Block {
  mk::CudaWorker& w;
  __device__ int thread() const { return w.thread(); }
  __device__ int threads() const { return w.threads(); }
  __device__ void sync() const { w.sync(); }
  __device__ kernels::Scratch scratch() const { return w.scratch(); }
  __device__ mk::CudaWorker::Reader weights(const kernels::WeightStream& s) const { return w.weights(s); }
  __device__ void set_wait_count(int, int64_t, int64_t) const {}  // no events here: moe_block_test checks them
};
// The block of the megakernel's entry for steps of more than 16 tokens: its projections' passes
// take up to kWidePassSets sets of 16 (kernels/llm/gemv.h).
struct WideBlock : Block {
  static constexpr int kPassSets = kernels::llm::kWidePassSets;
};

// Runs every tile of the box, a block taking tiles in turn (grid-stride) as a megakernel worker
// does: the consumer threads run the body, the loader warp fills the ring with each tile's weight
// stream ahead of them. n is the same for every consumer thread, so the bodies' barriers are
// reached by all.
template <class Body, class B>
__global__ void __launch_bounds__(kThreads + 32, 1) run_tiles(const TileLaunch launch, const __grid_constant__ mk::LaunchArgs a) {
  mk::CudaWorker w(kThreads, kRingStages);
  w.init(a);
  int64_t total = 1;
  for (int k = 0; k < launch.rank; ++k) total *= launch.extent[k];
  const auto tile_of = [&](int64_t n, int64_t* tile) {
    int64_t rest = n;
    for (int k = launch.rank - 1; k >= 0; --k) {
      tile[k] = launch.first[k] + rest % launch.extent[k];
      rest /= launch.extent[k];
    }
  };
  if (w.is_loader()) {
    if (threadIdx.x % 32 != 0) return;
    for (int64_t n = blockIdx.x; n < total; n += gridDim.x) {
      int64_t tile[TileLaunch::kMaxRank] = {};
      tile_of(n, tile);
      w.load(Body::stream(B{w}, tile, launch.reads, launch.writes), false);
    }
    w.finish_loading();
    return;
  }
  for (int64_t n = blockIdx.x; n < total; n += gridDim.x) {
    int64_t tile[TileLaunch::kMaxRank] = {};
    tile_of(n, tile);
    Body::run(B{w}, tile, launch.reads, launch.writes);
    w.sync();
  }
}

template <class Body, class B>
cudaError_t launch_tiles(const TileLaunch& launch, int blocks, cudaStream_t stream) {
  const cudaError_t e =
      cudaFuncSetAttribute(run_tiles<Body, B>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (e != cudaSuccess) return e;
  mk::LaunchArgs a{};
  a.spin_limit_ns = 1'000'000'000;
  a.ring_stages = kRingStages;
  run_tiles<Body, B><<<blocks, kThreads + 32, kSharedBytes, stream>>>(launch, a);
  return cudaGetLastError();
}

// The weight stream of a body that reads none.
template <class Block>
__device__ kernels::WeightStream no_stream(const Block&, const int64_t*, const DevBuffer*, const DevBuffer*) {
  return kernels::WeightStream{};
}

// A body as a type: the kernel template takes it by type rather than by function pointer, so the
// host never needs the __host__ __device__ body instantiated for a block whose methods are
// __device__ only. A body with a weight stream runs projections (kernels/llm/gemv.h), which the
// wide block runs too.
#define EVT_LLM_BODY(tag, row_name, body_fn, stream_fn, reads, writes)                                               \
  struct tag {                                                                                                      \
    static constexpr const char* kRow = row_name;                                                                   \
    static constexpr const char* kBody = #body_fn;                                                                  \
    static constexpr int kReads = reads, kWrites = writes;                                                          \
    static constexpr bool kStreams = std::string_view(#stream_fn) != "evt::testing::llm::no_stream";                \
    static_assert(kReads <= TileLaunch::kMaxBuffers && kWrites <= TileLaunch::kMaxBuffers);                         \
    template <class B>                                                                                              \
    __device__ static void run(const B& b, const int64_t* tile, const DevBuffer* r, const DevBuffer* w) {           \
      body_fn(b, tile, r, w);                                                                                       \
    }                                                                                                               \
    template <class B>                                                                                              \
    __device__ static kernels::WeightStream stream(const B& b, const int64_t* tile, const DevBuffer* r,             \
                                                   const DevBuffer* w) {                                            \
      return stream_fn(b, tile, r, w);                                                                              \
    }                                                                                                               \
  };

#include "kernels/llm_tile_bodies.inc"
#include "kernels/moe_tile_bodies.inc"
#undef EVT_LLM_BODY

template <class Body>
constexpr CudaTileBody entry() {
  if constexpr (Body::kStreams) {
    return CudaTileBody{Body::kRow, Body::kBody, Body::kReads, Body::kWrites, &launch_tiles<Body, Block>,
                        &launch_tiles<Body, WideBlock>};
  } else {
    return CudaTileBody{Body::kRow, Body::kBody, Body::kReads, Body::kWrites, &launch_tiles<Body, Block>, nullptr};
  }
}

const CudaTileBody kBodies[] = {
#define EVT_LLM_BODY(tag, row, body, stream, reads, writes) entry<tag>(),
#include "kernels/llm_tile_bodies.inc"
#include "kernels/moe_tile_bodies.inc"
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
