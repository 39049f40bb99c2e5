// GPU suite (label gpu): generated megakernels on the GPU equal the CPU executor exactly, for
// B = 1..64 in shuffled order from one kernel and one set of counters, static and dynamic; a
// wrong wait count times out with a record instead of hanging, and the GPU stays usable.

#include <gtest/gtest.h>


#include "megakernels/layered_stack.h"
#include "megakernels/moe_routed.h"
#include "megakernels/splitk.h"
#include "megakernels/splitk_wrong_count.h"
#include "megakernels/staged_add.h"
#include "random_graphs.h"
#include "runtime/megakernel/cuda_instance.h"
#include "support/graph_fixtures.h"

namespace evt {
namespace {

// Device copies of a store's buffers.
class DeviceBuffers {
 public:
  explicit DeviceBuffers(const runtime::cpu::BufferStore& store, size_t count) {
    for (size_t b = 0; b < count; ++b) {
      auto bytes = store.bytes(static_cast<int>(b));
      void* d = nullptr;
      EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(bytes.size(), 1)), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
      pointers_.push_back(d);
    }
  }
  ~DeviceBuffers() {
    for (void* d : pointers_) cudaFree(d);
  }
  // Copies a store's buffers into the front of these (which may be larger).
  void upload(const runtime::cpu::BufferStore& store) const {
    for (size_t b = 0; b < pointers_.size(); ++b) {
      auto bytes = store.bytes(static_cast<int>(b));
      EXPECT_EQ(cudaMemcpy(pointers_[b], bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  void copy_back(runtime::cpu::BufferStore& store) const {
    for (size_t b = 0; b < pointers_.size(); ++b) {
      auto bytes = store.mutable_bytes(static_cast<int>(b));
      EXPECT_EQ(cudaMemcpy(bytes.data(), pointers_[b], bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
  }
  std::span<void* const> pointers() const { return pointers_; }

 private:
  std::vector<void*> pointers_;
};

// Exec modes: the megakernel (static, dynamic with or without early push, per-group), kernels,
// and kernels replayed from CUDA graphs.
struct Mode {
  mk::Schedule schedule;
  bool cuda_graph = false;
  bool early_push = false;
};
std::ostream& operator<<(std::ostream& os, const Mode& m) {
  return os << "schedule " << m.schedule << (m.cuda_graph ? " graph" : "") << (m.early_push ? " early push" : "");
}
constexpr Mode kAllModes[] = {{mk::kStatic}, {mk::kDynamic}, {mk::kDynamic, false, true}, {mk::kPerGroup},
                              {mk::kPerGroup, false, true}, {mk::kKernels}, {mk::kKernels, true}};
const auto kModes = ::testing::ValuesIn(kAllModes);

// Runs the compiled graph `g` through the CPU executor and through megakernel MK on the device for
// each binding, in order, on one instance.
template <class MK>
void check_against_executor(const ir::Graph& g, const std::vector<ir::Binding>& bindings, Mode mode) {
  auto kernel = mk::CudaMegakernel<MK>::create();
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (size_t k = 0; k < bindings.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << g.name << " " << ir::binding_str(bindings[k]) << " " << mode);
    auto tg = ir::instantiate(g, bindings[k]);
    ASSERT_TRUE(tg.ok()) << tg.status().message();
    auto expected = testing::seeded_store(*tg, k);
    ASSERT_TRUE(runtime::cpu::execute_serial(*tg, kernels::Registry::builtins(), *expected).ok());

    auto store = testing::seeded_store(*tg, k);
    DeviceBuffers device(*store, g.buffers.size());
    auto params = mk::make_params<MK>(testing::dim_values(g, bindings[k]), device.pointers());
    ASSERT_TRUE(params.ok()) << params.status().message();
    Status run = (*kernel)->run(*params, {.schedule = mode.schedule, .early_push = mode.early_push,
                                          .cuda_graph = mode.cuda_graph, .stream = stream});
    ASSERT_TRUE(run.ok()) << run.message();
    device.copy_back(*store);
    Status same = store->compare_outputs(*expected);
    ASSERT_TRUE(same.ok()) << same.message();
  }
  cudaStreamDestroy(stream);
}

// A shipped or test graph file, verified for B = 17 (or its one dim `dim`), run for 1..64 shuffled.
template <class MK>
void check_file_against_executor(const std::string& path, Mode mode, uint64_t seed, const std::string& dim = "B") {
  check_against_executor<MK>(testing::compiled_graph(path, {{dim, 17}}),
                             testing::bindings_of(dim, testing::shuffled_bindings(seed)), mode);
}

class SplitK : public ::testing::TestWithParam<Mode> {};
TEST_P(SplitK, MatchesExecutor) {
  check_file_against_executor<generated::splitk::Megakernel>(testing::example_path("splitk.evt"), GetParam(), 1);
}
class Moe : public ::testing::TestWithParam<Mode> {};
TEST_P(Moe, MatchesExecutor) {
  check_file_against_executor<generated::moe_routed::Megakernel>(testing::example_path("moe_routed.evt"), GetParam(), 2);
}
INSTANTIATE_TEST_SUITE_P(MegakernelGpu, SplitK, kModes);
INSTANTIATE_TEST_SUITE_P(MegakernelGpu, Moe, kModes);
class StagedAdd : public ::testing::TestWithParam<Mode> {};
TEST_P(StagedAdd, PrologueRunsForEveryTask) {
  check_file_against_executor<generated::staged_add::Megakernel>(testing::test_graph_path("staged_add.evt"), GetParam(),
                                                                 3, "T");
}
INSTANTIATE_TEST_SUITE_P(MegakernelGpu, StagedAdd, kModes);

// Layered groups: layer by layer in the static order, one launch per group and layer in the
// kernels modes, released layer by layer by the dynamic queue.
class LayeredStack : public ::testing::TestWithParam<Mode> {};
TEST_P(LayeredStack, MatchesExecutor) {
  std::vector<ir::Binding> bindings;
  for (int64_t layers : {3, 1, 36, 0, 64}) {
    for (int64_t b : {5, 1, 64, 300}) bindings.push_back({{"B", b}, {"L", layers}});
  }
  check_against_executor<generated::layered_stack::Megakernel>(
      testing::compiled_graph(testing::example_path("layered_stack.evt"), bindings.front()), bindings, GetParam());
}
INSTANTIATE_TEST_SUITE_P(MegakernelGpu, LayeredStack, kModes);

// Random graphs written at build time from fixed seeds (support/random_graph.h), in every exec
// mode: a wrong result or an early start (a dependency read before its write) differs from the
// serial run.
template <class G>
class RandomGraph : public ::testing::Test {};
TYPED_TEST_SUITE(RandomGraph, testing::random_graphs::All<::testing::Types>, testing::SeedName);
TYPED_TEST(RandomGraph, EveryModeMatchesExecutor) {
  const auto bindings = testing::build_time_bindings();
  const ir::Graph g = testing::compiled(testing::build_time_graph(TypeParam::kSeed), bindings);
  for (const Mode& mode : kAllModes) check_against_executor<typename TypeParam::Megakernel>(g, bindings, mode);
}

// The graphs mode as vLLM and SGLang run it: each batch is padded up to one of a few captured
// sizes. Every B in 1..64 replays one of 7 graphs, and its rows equal the CPU executor's.
TEST(MegakernelGpu, GraphsPadBatchesToBuckets) {
  using MK = generated::splitk::Megakernel;
  const std::vector<int64_t> buckets = {1, 2, 4, 8, 16, 32, 64};
  const ir::Graph g = testing::compiled_graph(testing::example_path("splitk.evt"), {{"B", 17}});
  auto kernel = mk::CudaMegakernel<MK>::create();
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  auto largest = ir::instantiate(g, {{"B", buckets.back()}});
  ASSERT_TRUE(largest.ok());
  DeviceBuffers device(*testing::seeded_store(*largest, 0), g.buffers.size());
  // The largest bucket first: it sizes the scheduler's arena, which never grows after (growing
  // it drops the graphs, which point into it).
  std::vector<int64_t> order = testing::shuffled_bindings(4);
  order.insert(order.begin(), buckets.back());
  for (int64_t b : order) {
    SCOPED_TRACE(::testing::Message() << "B=" << b);
    auto tg = ir::instantiate(g, {{"B", b}});
    ASSERT_TRUE(tg.ok()) << tg.status().message();
    auto expected = testing::seeded_store(*tg, b);
    ASSERT_TRUE(runtime::cpu::execute_serial(*tg, kernels::Registry::builtins(), *expected).ok());
    auto store = testing::seeded_store(*tg, b);
    device.upload(*store);
    const int64_t dims[] = {b};
    auto params = mk::make_params<MK>(dims, device.pointers());
    ASSERT_TRUE(params.ok()) << params.status().message();
    Status run = (*kernel)->run(*params, {.schedule = mk::kKernels, .cuda_graph = true, .bucket_dim = 0,
                                          .buckets = buckets, .stream = stream});
    ASSERT_TRUE(run.ok()) << run.message();
    device.copy_back(*store);
    Status same = store->compare_outputs(*expected);
    ASSERT_TRUE(same.ok()) << same.message();
  }
  EXPECT_EQ((*kernel)->captured_graphs(), buckets.size());
  const int64_t too_big[] = {65};
  auto params = mk::make_params<MK>(too_big, device.pointers());
  ASSERT_TRUE(params.ok());
  Status refused = (*kernel)->run(*params, {.schedule = mk::kKernels, .cuda_graph = true, .bucket_dim = 0,
                                            .buckets = buckets, .stream = stream});
  EXPECT_NE(refused.message().find("beyond the largest CUDA-graph bucket, 64"), std::string::npos) << refused.message();
  cudaStreamDestroy(stream);
}

using WrongCount = generated::splitk_wrong_count::Megakernel;

Status run_wrong_count(mk::CudaMegakernel<WrongCount>& kernel, mk::Schedule schedule) {
  const int64_t b = 5;
  std::vector<float> host(b * 32 * 128, 1.0f);
  void* buffers[3];
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(cudaMalloc(&buffers[i], host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(buffers[i], host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  const int64_t dims[] = {b};
  auto params = mk::make_params<WrongCount>(dims, buffers);
  EXPECT_TRUE(params.ok());
  Status s = kernel.run(*params, {.schedule = schedule, .spin_limit_ns = 50'000'000});
  for (void* p : buffers) cudaFree(p);
  return s;
}

TEST(MegakernelGpu, WrongCountTimesOutAndTheGpuStaysUsable) {
  auto kernel = mk::CudaMegakernel<WrongCount>::create();
  ASSERT_TRUE(kernel.ok()) << kernel.status().message();
  Status s = run_wrong_count(**kernel, mk::kStatic);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wait timed out"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("task final("), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 notifications missing"), std::string::npos) << s.message();
  Status d = run_wrong_count(**kernel, mk::kDynamic);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("the dynamic launch ended with 20 of 25 tasks run"), std::string::npos) << d.message();
  // The device is fine afterwards: a correct graph runs and matches.
  check_file_against_executor<generated::splitk::Megakernel>(testing::example_path("splitk.evt"), Mode{mk::kStatic}, 5);
}

TEST(MegakernelGpu, TraceRecordsEveryTaskOnceWithItsBarriers) {
  using MK = generated::splitk::Megakernel;
  const int64_t b = 9;
  const ir::Graph g = testing::compiled_example("splitk.evt", {{"B", b}});
  auto tg = ir::instantiate(g, {{"B", b}});
  ASSERT_TRUE(tg.ok());
  auto store = testing::seeded_store(*tg, 1);
  DeviceBuffers device(*store, g.buffers.size());
  const int64_t dims[] = {b};
  auto params = mk::make_params<MK>(dims, device.pointers());
  ASSERT_TRUE(params.ok());
  auto kernel = mk::CudaMegakernel<MK>::create();
  ASSERT_TRUE(kernel.ok());
  for (mk::Schedule s : {mk::kStatic, mk::kDynamic}) {
    ASSERT_TRUE((*kernel)->run(*params, {.schedule = s, .trace = true}).ok());
    SCOPED_TRACE(::testing::Message() << "schedule " << s);
    testing::expect_each_task_traced_once((*kernel)->last_trace(), static_cast<size_t>(b * 5), (*kernel)->sms());
    // A GPU block passes at least the barrier that shares the wait's outcome and the one after the body.
    for (const auto& e : (*kernel)->last_trace()) EXPECT_GE(e.barriers_ns.size(), 2u);
  }
  ASSERT_TRUE((*kernel)->run(*params, {}).ok());
  EXPECT_TRUE((*kernel)->last_trace().empty());
}

TEST(MegakernelGpu, GridBeyondCoResidencyIsRefused) {
  auto kernel = mk::CudaMegakernel<generated::splitk::Megakernel>::create();
  ASSERT_TRUE(kernel.ok());
  std::vector<void*> none(3, nullptr);
  const int64_t dims[] = {1};
  auto params = mk::make_params<generated::splitk::Megakernel>(dims, none);
  ASSERT_TRUE(params.ok());
  Status s = (*kernel)->run(*params, {.blocks = (*kernel)->max_coresident_blocks() + 1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot be co-resident"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace evt
