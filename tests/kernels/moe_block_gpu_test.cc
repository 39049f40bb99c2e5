// GPU suite (label gpu): the MoE block's tile bodies (docs/moe_decode.md) on the GPU, in blocks of
// the decode megakernel's shape with the loader warp streaming their weights, against the CPU
// references, stage by stage on moe_block_case.h's two layers (dense, then sparse), each stage
// reading what the reference chain left, for 5 tokens and for 300. Weights go to the device and
// wtab is rebuilt with their device addresses; outputs are poisoned first. Each stage runs on few
// blocks (a block takes several tiles in turn) and on one block per tile.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/llm_tiles_cuda.h"
#include "kernels/moe_block_case.h"

namespace evt::kernels::llm::testing {
namespace {

using evt::testing::llm::CudaTileBody;
using evt::testing::llm::find_cuda_tile_body;
using evt::testing::llm::TileLaunch;

#define EVT_CUDA_ASSERT(call)                                                    \
  do {                                                                           \
    const cudaError_t evt_e = (call);                                            \
    ASSERT_EQ(evt_e, cudaSuccess) << #call << ": " << cudaGetErrorString(evt_e); \
  } while (0)

// Device allocations of one test, freed together.
class DeviceMemory {
 public:
  ~DeviceMemory() {
    for (void* p : allocations_) EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
  // A device copy of `bytes` bytes at `data`; null on failure (the test has failed then).
  void* upload(const void* data, size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) return nullptr;
    allocations_.push_back(p);
    if (cudaMemcpy(p, data, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
    return p;
  }

 private:
  std::vector<void*> allocations_;
};

DevBuffer dev_buffer(void* data, const Buffers::Buf& b) {
  DevBuffer d;
  d.data = data;
  d.rank = static_cast<int>(b.shape.size());
  d.numel = 1;
  for (int k = 0; k < d.rank; ++k) d.numel *= (d.shape[k] = b.shape[static_cast<size_t>(k)]);
  return d;
}

// Every stage of c on both layers: the bodies on the GPU against the references on the CPU.
void expect_gpu_stages_match(MoeBlockCase& c) {
  DeviceMemory mem;
  std::vector<int64_t> device_weights;
  for (const std::vector<uint16_t>* w : c.weights()) {
    void* d = mem.upload(w->data(), w->size() * 2);
    ASSERT_NE(d, nullptr);
    device_weights.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(d)));
  }
  for (int64_t l : {0, 1}) {
    for (const MoeStage& s : c.stages()) {
      SCOPED_TRACE(std::string(s.row) + " layer " + std::to_string(l));
      const CudaTileBody* body = find_cuda_tile_body(s.row);
      ASSERT_NE(body, nullptr) << "no CUDA entry";
      const TileFunction* fn = Registry::builtins().find(s.row);
      ASSERT_NE(fn, nullptr);
      EXPECT_EQ(fn->device_body, body->body);
      ASSERT_EQ(body->num_reads, static_cast<int>(s.reads.size()));
      ASSERT_EQ(body->num_writes, static_cast<int>(s.writes.size()));

      // The reads as the reference chain left them, wtab holding the device weights' addresses.
      TileLaunch launch;
      c.point_wtab(device_weights);
      for (size_t k = 0; k < s.reads.size(); ++k) {
        Buffers::Buf& b = c.b.all.at(s.reads[k]);
        void* d = mem.upload(b.data(), b.bytes());
        ASSERT_NE(d, nullptr);
        launch.reads[k] = dev_buffer(d, b);
      }
      c.point_wtab(c.host_addresses());
      launch.rank = s.tiles == 0 ? 1 : 2;
      launch.first[0] = l;
      launch.extent[0] = 1;
      launch.extent[1] = s.tiles;
      const std::map<std::string, Buffers::Buf> want = c.run_reference(s, l);

      const int64_t tiles = std::max<int64_t>(s.tiles, 1);
      for (const int64_t blocks : {std::min<int64_t>(tiles, 3), tiles}) {
        SCOPED_TRACE(::testing::Message() << blocks << " blocks for " << tiles << " tiles");
        std::map<std::string, Buffers::Buf> got = want;
        std::vector<void*> outputs;
        for (size_t k = 0; k < s.writes.size(); ++k) {
          Buffers::Buf& b = got.at(s.writes[k]);
          for (float& x : b.f32) x = std::numeric_limits<float>::quiet_NaN();
          for (uint16_t& x : b.bf16) x = kBf16NaN;
          for (int32_t& x : b.i32) x = -7;
          void* d = mem.upload(b.data(), b.bytes());
          ASSERT_NE(d, nullptr);
          launch.writes[k] = dev_buffer(d, b);
          outputs.push_back(d);
        }
        EVT_CUDA_ASSERT(body->launch(launch, static_cast<int>(blocks), nullptr));
        EVT_CUDA_ASSERT(cudaDeviceSynchronize());
        for (size_t k = 0; k < s.writes.size(); ++k) {
          Buffers::Buf& b = got.at(s.writes[k]);
          EVT_CUDA_ASSERT(cudaMemcpy(b.data(), outputs[k], b.bytes(), cudaMemcpyDeviceToHost));
        }
        ASSERT_NO_FATAL_FAILURE(expect_outputs_match(s, got, want));
      }
    }
  }
}

TEST(MoeBlockGpu, BodiesMatchReferencesStageByStage) {
  MoeBlockCase c;
  expect_gpu_stages_match(c);
}

// 300 tokens: several passes of the router and of every expert's tiles, 600 rows for the plan.
TEST(MoeBlockGpu, ManyTokensMatchReferencesStageByStage) {
  MoeBlockCase c;
  std::mt19937 rng(7);
  c.add_step_buffers(300, rng);
  expect_gpu_stages_match(c);
}

}  // namespace
}  // namespace evt::kernels::llm::testing
