// GPU suite (label gpu): the LLM tile bodies on the GPU, in blocks of the megakernel's 128
// threads, against the CPU references on the cases of llm_tile_cases.h, with the tolerance table
// of llm_tile_check.h. Weights go to the device and wtab is rebuilt with their device addresses;
// outputs are poisoned and guarded on the device as on the host. Each case runs twice: on few
// blocks, so that blocks take several tiles in turn and meet shared memory their previous tile
// left, and on one block per tile.

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "kernels/llm_tile_check.h"
#include "kernels/llm_tiles_cuda.h"
#include "kernels/registry.h"

namespace evt::testing::llm {
namespace {

#define EVT_CUDA_ASSERT(call)                                                    \
  do {                                                                           \
    const cudaError_t evt_e = (call);                                            \
    ASSERT_EQ(evt_e, cudaSuccess) << #call << ": " << cudaGetErrorString(evt_e); \
  } while (0)

// Device allocations of one run, freed together.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() {
    for (void* p : allocations_) EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
  // A device copy of `bytes`; *out stays null on failure (the test has failed then).
  void upload(const std::vector<std::byte>& bytes, std::byte** out) {
    *out = nullptr;
    void* p = nullptr;
    EVT_CUDA_ASSERT(cudaMalloc(&p, std::max<size_t>(bytes.size(), 1)));
    allocations_.push_back(p);
    EVT_CUDA_ASSERT(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    *out = static_cast<std::byte*>(p);
  }

 private:
  std::vector<void*> allocations_;
};

kernels::DevBuffer dev_buffer(std::byte* data, const HostTensor& t) {
  kernels::DevBuffer d;
  d.data = data;
  d.rank = static_cast<int>(t.shape.size());
  d.numel = t.numel();
  for (int k = 0; k < d.rank; ++k) d.shape[k] = t.shape[static_cast<size_t>(k)];
  return d;
}

// Runs case `c` (a copy: its wtab is rewritten) through `body` on `blocks` blocks (of wide passes
// with `wide`) and downloads the outputs, guard bands included, into `out`.
void run_on_gpu(Case c, const CudaTileBody& body, int blocks, std::vector<GuardedImage>& out, bool wide = false) {
  ASSERT_LE(c.reads.size(), static_cast<size_t>(TileLaunch::kMaxBuffers));
  ASSERT_LE(c.writes.size(), static_cast<size_t>(TileLaunch::kMaxBuffers));
  ASSERT_LE(c.rank(), TileLaunch::kMaxRank);
  DeviceArena arena;
  std::vector<const void*> addresses;
  for (const HostTensor& w : c.weights) {
    std::byte* d = nullptr;
    ASSERT_NO_FATAL_FAILURE(arena.upload(w.bytes, &d));
    addresses.push_back(d);
  }
  set_weight_addresses(c, addresses);  // before wtab itself is uploaded below

  TileLaunch launch;
  for (size_t k = 0; k < c.reads.size(); ++k) {
    std::byte* d = nullptr;
    ASSERT_NO_FATAL_FAILURE(arena.upload(c.reads[k].bytes, &d));
    launch.reads[k] = dev_buffer(d, c.reads[k]);
  }
  out = poisoned_outputs(c);
  std::vector<std::byte*> device_out;
  for (size_t k = 0; k < c.writes.size(); ++k) {
    std::byte* d = nullptr;
    ASSERT_NO_FATAL_FAILURE(arena.upload(out[k].bytes, &d));  // poison and guards
    device_out.push_back(d);
    launch.writes[k] = dev_buffer(d + kGuardBytes, c.writes[k].tensor);
  }
  const std::vector<int64_t> first = c.first(), extent = c.extent();
  launch.rank = c.rank();
  for (int k = 0; k < c.rank(); ++k) {
    launch.first[k] = first[static_cast<size_t>(k)];
    launch.extent[k] = extent[static_cast<size_t>(k)];
  }

  EVT_CUDA_ASSERT((wide ? body.launch_wide : body.launch)(launch, blocks, nullptr));
  EVT_CUDA_ASSERT(cudaDeviceSynchronize());
  for (size_t k = 0; k < c.writes.size(); ++k) {
    EVT_CUDA_ASSERT(cudaMemcpy(out[k].bytes.data(), device_out[k], out[k].bytes.size(), cudaMemcpyDeviceToHost));
  }
}

// The reference's outputs of case `c`, on the host.
std::vector<GuardedImage> reference_outputs(const Case& c) {
  const kernels::TileFunction* fn = kernels::Registry::builtins().find(c.spec.row);
  EXPECT_NE(fn, nullptr);
  std::vector<GuardedImage> want = poisoned_outputs(c);
  if (fn != nullptr) run_on_cpu(c, fn->cpu, want);
  return want;
}

const CudaTileBody* cuda_body(const std::string& row) {
  const CudaTileBody* body = find_cuda_tile_body(row.c_str());
  EXPECT_NE(body, nullptr) << "no CUDA entry for " << row;
  return body;
}

TEST(LlmTilesGpuCoverage, EveryRowHasTheRegistrysBody) {
  EXPECT_EQ(cuda_block_threads(), kernels::llm::kDecodeThreads);
  for (const std::string& row : llm_rows()) {
    SCOPED_TRACE(row);
    const kernels::TileFunction* fn = kernels::Registry::builtins().find(row);
    ASSERT_NE(fn, nullptr);
    const CudaTileBody* body = cuda_body(row);
    ASSERT_NE(body, nullptr);
    EXPECT_EQ(fn->device_body, body->body);
    EXPECT_EQ(fn->num_reads, body->num_reads);
    EXPECT_EQ(fn->num_writes, body->num_writes);
  }
}

class LlmTilesGpu : public ::testing::TestWithParam<CaseSpec> {};

TEST_P(LlmTilesGpu, BodyMatchesReference) {
  const Case c = build_case(GetParam());
  const CudaTileBody* body = cuda_body(c.spec.row);
  ASSERT_NE(body, nullptr);
  const std::vector<GuardedImage> want = reference_outputs(c);
  const int64_t tiles = c.tile_count();
  std::vector<GuardedImage> narrow;  // the outputs of passes of 16 tokens, on every tile's block
  for (const int64_t blocks : {std::min<int64_t>(tiles, 3), tiles}) {
    SCOPED_TRACE(::testing::Message() << blocks << " blocks for " << tiles << " tiles");
    std::vector<GuardedImage> got;
    ASSERT_NO_FATAL_FAILURE(run_on_gpu(c, *body, static_cast<int>(blocks), got));
    const std::vector<OutputReport> reports = compare_outputs(c, got, want);
    for (const OutputReport& r : reports) {
      std::cout << "[ max err  ] gpu " << c.spec.row << " " << c.name << " " << blocks << " blocks: " << r.summary()
                << "\n";
      EXPECT_TRUE(r.checks_something()) << r.buffer << ": the case checks nothing";
    }
    EXPECT_TRUE(all_ok(reports)) << describe_failures(reports);
    narrow = std::move(got);
  }
  // Wide passes add every token's sums in the order passes of 16 do: the same outputs, bit for bit.
  if (body->launch_wide != nullptr) {
    std::vector<GuardedImage> wide;
    ASSERT_NO_FATAL_FAILURE(run_on_gpu(c, *body, static_cast<int>(std::min<int64_t>(tiles, 3)), wide, true));
    ASSERT_EQ(wide.size(), narrow.size());
    for (size_t k = 0; k < wide.size(); ++k) {
      if (c.writes[k].scratch) continue;
      EXPECT_TRUE(wide[k].bytes == narrow[k].bytes) << c.name << ": output " << c.writes[k].tensor.name
                                                    << " of wide passes differs from that of passes of 16";
    }
  }
}

std::string spec_test_name(const ::testing::TestParamInfo<CaseSpec>& info) {
  return info.param.row + "_" + case_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(Cases, LlmTilesGpu, ::testing::ValuesIn(llm_case_specs()), spec_test_name);

// The GPU harness is not vacuous: a perturbed input on the device fails the comparison.
class LlmTilesGpuMustFail : public ::testing::TestWithParam<std::string> {};

TEST_P(LlmTilesGpuMustFail, PerturbedInputIsCaught) {
  for (const CaseSpec& s : llm_case_specs()) {
    if (s.row != GetParam()) continue;
    const Case c = build_case(s);
    if (c.probe.read < 0) continue;
    const CudaTileBody* body = cuda_body(c.spec.row);
    ASSERT_NE(body, nullptr);
    Case perturbed = c;
    perturb(perturbed.reads[static_cast<size_t>(c.probe.read)], c.probe.element);
    std::vector<GuardedImage> got;
    ASSERT_NO_FATAL_FAILURE(run_on_gpu(perturbed, *body, 3, got));
    EXPECT_FALSE(all_ok(compare_outputs(c, got, reference_outputs(c))))
        << c.name << ": perturbing " << c.reads[static_cast<size_t>(c.probe.read)].element_name(c.probe.element)
        << " went unnoticed";
    return;
  }
  FAIL() << "no case of " << GetParam() << " has a probe";
}

std::string row_test_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Rows, LlmTilesGpuMustFail, ::testing::ValuesIn(llm_rows()), row_test_name);

}  // namespace
}  // namespace evt::testing::llm
