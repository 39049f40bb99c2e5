// Generated megakernels run on CPU threads (the CPU backend) against the CPU executor: the same
// generated scheduling code the GPU runs, in CI. One instance serves every binding in turn, so
// the counters carry over between launches with no reset.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "megakernels/layered_stack.h"
#include "megakernels/moe_routed.h"
#include "megakernels/splitk.h"
#include "megakernels/splitk_wrong_count.h"
#include "megakernels/staged_add.h"
#include "random_graphs.h"
#include "runtime/megakernel/instance.h"
#include "support/graph_fixtures.h"

namespace evt {
namespace {

// How a megakernel is run: its schedule, and for dynamic ones whether consumers are pushed early.
struct Mode {
  mk::Schedule schedule;
  bool early_push = false;
};
std::ostream& operator<<(std::ostream& os, const Mode& m) {
  return os << "schedule " << m.schedule << (m.early_push ? " early push" : "");
}
constexpr Mode kAllModes[] = {{mk::kStatic}, {mk::kDynamic}, {mk::kDynamic, true}, {mk::kKernels}, {mk::kPerGroup},
                              {mk::kPerGroup, true}};
const auto kModes = ::testing::ValuesIn(kAllModes);

// Runs the compiled graph `g` through the CPU executor and through megakernel MK for each binding,
// in order, on one instance.
template <class MK>
void check_against_executor(const ir::Graph& g, const std::vector<ir::Binding>& bindings, Mode mode) {
  mk::CpuMegakernel<MK> kernel;
  for (size_t k = 0; k < bindings.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << g.name << " " << ir::binding_str(bindings[k]) << " " << mode);
    auto tg = ir::instantiate(g, bindings[k]);
    ASSERT_TRUE(tg.ok()) << tg.status().message();
    auto expected = testing::seeded_store(*tg, k);
    auto serial = runtime::cpu::execute_serial(*tg, kernels::Registry::builtins(), *expected);
    ASSERT_TRUE(serial.ok()) << serial.status().message();

    auto store = testing::seeded_store(*tg, k);
    std::vector<void*> buffers;
    for (size_t i = 0; i < g.buffers.size(); ++i) buffers.push_back(store->mutable_bytes(static_cast<int>(i)).data());
    auto params = mk::make_params<MK>(testing::dim_values(g, bindings[k]), buffers);
    ASSERT_TRUE(params.ok()) << params.status().message();
    Status run = kernel.run(*params, {.workers = 1 + static_cast<int>(k % 4), .schedule = mode.schedule,
                                      .early_push = mode.early_push});
    ASSERT_TRUE(run.ok()) << run.message();
    Status same = store->compare_outputs(*expected);
    ASSERT_TRUE(same.ok()) << same.message();
  }
}

// A shipped or test graph file, verified for B = 17 (or its one dim `dim`), run for 1..64 shuffled.
template <class MK>
void check_file_against_executor(const std::string& path, uint64_t seed, Mode mode, const std::string& dim = "B") {
  check_against_executor<MK>(testing::compiled_graph(path, {{dim, 17}}),
                             testing::bindings_of(dim, testing::shuffled_bindings(seed)), mode);
}

class SplitK : public ::testing::TestWithParam<Mode> {};
TEST_P(SplitK, MatchesExecutor) {
  check_file_against_executor<generated::splitk::Megakernel>(testing::example_path("splitk.evt"),
                                                             GetParam().schedule + 1, GetParam());
}
INSTANTIATE_TEST_SUITE_P(MegakernelCpu, SplitK, kModes);

// Per-group: the expert group runs from the ready queue, the rest in static order. The first
// binding runs on one worker, so combine's static wait must run the expert tasks itself (Help).
class Moe : public ::testing::TestWithParam<Mode> {};
TEST_P(Moe, MatchesExecutor) {
  check_file_against_executor<generated::moe_routed::Megakernel>(testing::example_path("moe_routed.evt"),
                                                                 GetParam().schedule + 7, GetParam());
}
INSTANTIATE_TEST_SUITE_P(MegakernelCpu, Moe, kModes);

// The prefetch prologue: each add tile stages its weight row before waiting; skipping the
// prologue, or running it after the body, leaves poison in the result.
class StagedAdd : public ::testing::TestWithParam<Mode> {};
TEST_P(StagedAdd, PrologueRunsForEveryTask) {
  check_file_against_executor<generated::staged_add::Megakernel>(testing::test_graph_path("staged_add.evt"), 11,
                                                                 GetParam(), "T");
}
INSTANTIATE_TEST_SUITE_P(MegakernelCpu, StagedAdd, kModes);

// Layered groups: the static order runs them layer by layer, the kernels mode launches each
// once per layer, and the dynamic queue releases layer l + 1 as layer l completes. One worker
// included: each layer must wait only on the layers before it.
class LayeredStack : public ::testing::TestWithParam<Mode> {};
TEST_P(LayeredStack, MatchesExecutor) {
  std::vector<ir::Binding> bindings;
  for (int64_t layers : {3, 1, 8, 0, 28}) {
    for (int64_t b : {5, 1, 17}) bindings.push_back({{"B", b}, {"L", layers}});
  }
  check_against_executor<generated::layered_stack::Megakernel>(
      testing::compiled_graph(testing::example_path("layered_stack.evt"), bindings.front()), bindings, GetParam());
}
INSTANTIATE_TEST_SUITE_P(MegakernelCpu, LayeredStack, kModes);

// A task's barriers survive the trace's packing: of those before its start (the inline queue's
// hand-out) only the last comes back, as the hand-out; an odd count and more than the record
// holds come back as recorded; once the worker's records are full, a task writes nothing and its
// barriers are forgotten.
struct BarrierWorker {
  std::vector<uint64_t> pending;
  int id() const { return 0; }
  uint64_t now_ns() const { return 1000; }
  template <class Fn>
  void take_barriers(Fn&& fn) {
    for (const uint64_t t : pending) fn(t);
    pending.clear();
  }
};

TEST(Trace, BarriersRoundTripThroughTheRecord) {
  std::vector<uint64_t> words(1 + mk::kTraceWords * 3, 0);
  mk::LaunchArgs a{};
  a.trace = words.data();
  a.trace_tasks_per_worker = 3;
  BarrierWorker w;
  w.pending = {90, 105, 130, 170};  // 90 comes before the task's start
  mk::trace_task(w, a.trace, a.trace_tasks_per_worker, 2, 7, 100, 104);
  std::vector<uint64_t> many;
  for (int k = 0; k < mk::kTraceBarriers + 3; ++k) many.push_back(200 + k);
  w.pending = many;
  mk::trace_task(w, a.trace, a.trace_tasks_per_worker, 1, 8, 200, 200);
  mk::trace_task(w, a.trace, a.trace_tasks_per_worker, 1, 9, 300, 310);  // no barriers
  const auto events = mk::decode_trace(words, 1, 3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].group, 2);
  EXPECT_EQ(events[0].linear, 7);
  EXPECT_EQ(events[0].end_ns, 1000u);
  EXPECT_EQ(events[0].barriers_ns, (std::vector<uint64_t>{105, 130, 170}));
  EXPECT_EQ(events[0].handout_ns, 90u);     // the last barrier before the start
  EXPECT_EQ(events[0].recorded_ns, 1000u);  // the worker's clock stands still
  EXPECT_EQ(events[1].handout_ns, 0u);
  EXPECT_EQ(events[1].barriers_ns,
            std::vector<uint64_t>(many.begin(), many.begin() + mk::kTraceBarriers));  // the first ones
  EXPECT_TRUE(events[2].barriers_ns.empty());
  EXPECT_EQ(events[2].waited_ns, 310u);
  const std::vector<uint64_t> before = words;
  w.pending = {410, 420, 430};
  // A fourth task: past the worker's 3 records.
  mk::trace_task(w, a.trace, a.trace_tasks_per_worker, 1, 10, 400, 400);
  EXPECT_EQ(words, before);
  EXPECT_TRUE(w.pending.empty());
}

// A trace grouped by stage and layer (what `eventide bench moe` times): one span per layer of the
// layered group and one for each other group, every task counted once; the kernels mode traces
// too, and there each layer's launch begins after the one before it ends.
TEST_P(LayeredStack, TraceSpansEachLayer) {
  using MK = generated::layered_stack::Megakernel;
  const int64_t b = 5, layers = 4;
  const ir::Binding binding{{"B", b}, {"L", layers}};
  const ir::Graph g = testing::compiled_graph(testing::example_path("layered_stack.evt"), binding);
  auto tg = ir::instantiate(g, binding);
  ASSERT_TRUE(tg.ok());
  auto store = testing::seeded_store(*tg, 1);
  std::vector<void*> buffers;
  for (size_t i = 0; i < g.buffers.size(); ++i) {
    buffers.push_back(store->mutable_bytes(static_cast<int>(i)).data());
  }
  const int64_t dims[] = {b, layers};
  auto params = mk::make_params<MK>(dims, buffers);
  ASSERT_TRUE(params.ok());
  mk::CpuMegakernel<MK> kernel;
  const Mode mode = GetParam();
  ASSERT_TRUE(kernel.run(*params, {.workers = 3, .schedule = mode.schedule, .early_push = mode.early_push,
                                   .trace = true}).ok());
  testing::expect_each_task_traced_once(kernel.last_trace(), static_cast<size_t>(b * (layers + 2)), 3);

  const auto spans = mk::stage_spans(kernel.last_trace(), [&](int g, int64_t linear) {
    return MK::task_layer(*params, g, linear);
  });
  std::vector<std::pair<std::string, int64_t>> seen;
  for (const mk::StageSpan& s : spans) {
    seen.emplace_back(MK::group_name(s.group), s.layer);
    EXPECT_EQ(s.tasks, b) << MK::group_name(s.group) << " layer " << s.layer;
    EXPECT_LE(s.start_ns, s.end_ns);
  }
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"seed", -1}, {"layer", 0}, {"layer", 1}, {"layer", 2}, {"layer", 3}, {"head", -1}};
  EXPECT_EQ(seen, expected);
  if (mode.schedule == mk::kKernels) {
    for (size_t i = 1; i < spans.size(); ++i) {
      const mk::StageSpan &before = spans[i - 1], &after = spans[i];
      if (before.group == after.group) {
        EXPECT_GE(after.start_ns, before.end_ns) << "layer " << after.layer;
      }
    }
  }
}

// Random graphs written at build time from fixed seeds (support/random_graph.h), every schedule:
// every task hashes the values of the tasks it depends on, and one read before its write leaves
// a mark, so both a wrong result and an early start differ from the serial run.
template <class G>
class RandomGraph : public ::testing::Test {};
TYPED_TEST_SUITE(RandomGraph, testing::random_graphs::All<::testing::Types>, testing::SeedName);
TYPED_TEST(RandomGraph, EveryScheduleMatchesExecutor) {
  const auto bindings = testing::build_time_bindings();
  const ir::Graph g = testing::compiled(testing::build_time_graph(TypeParam::kSeed), bindings);
  for (const Mode& mode : kAllModes) check_against_executor<typename TypeParam::Megakernel>(g, bindings, mode);
}

// Bound spins: a wrong count (verifier bypassed at codegen) stops the launch with a record.
Status run_wrong_count(mk::CpuMegakernel<generated::splitk_wrong_count::Megakernel>& kernel, int64_t b,
                       mk::Schedule schedule) {
  std::vector<float> a(b * 32 * 128, 1.0f), p(b * 32 * 4), c(b * 32);
  void* buffers[] = {a.data(), p.data(), c.data()};
  const int64_t dims[] = {b};
  auto params = mk::make_params<generated::splitk_wrong_count::Megakernel>(dims, buffers);
  EXPECT_TRUE(params.ok());
  return kernel.run(*params, {.workers = 3, .schedule = schedule, .spin_limit_ns = 100'000'000});
}

TEST(MegakernelCpu, WrongCountTimesOutWithRecordStatic) {
  mk::CpuMegakernel<generated::splitk_wrong_count::Megakernel> kernel;
  Status s = run_wrong_count(kernel, 3, mk::kStatic);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wait timed out"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("task final("), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("event E element"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 notifications missing"), std::string::npos) << s.message();
}

TEST(MegakernelCpu, WrongCountLeavesTasksUnrunDynamic) {
  mk::CpuMegakernel<generated::splitk_wrong_count::Megakernel> kernel;
  Status s = run_wrong_count(kernel, 3, mk::kDynamic);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the dynamic launch ended with 12 of 15 tasks run"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("event E element 0 received 4 of 5 notifications"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace evt

namespace evt {
namespace {

TEST(MegakernelCpu, TraceRecordsEveryTaskAndWritesChromeJson) {
  using MK = generated::splitk::Megakernel;
  const int64_t b = 5;
  const ir::Graph g = testing::compiled_example("splitk.evt", {{"B", b}});
  auto tg = ir::instantiate(g, {{"B", b}});
  ASSERT_TRUE(tg.ok());
  auto store = testing::seeded_store(*tg, 1);
  std::vector<void*> buffers;
  for (size_t i = 0; i < g.buffers.size(); ++i) buffers.push_back(store->mutable_bytes(static_cast<int>(i)).data());
  const int64_t dims[] = {b};
  auto params = mk::make_params<MK>(dims, buffers);
  ASSERT_TRUE(params.ok());
  mk::CpuMegakernel<MK> kernel;
  ASSERT_TRUE(kernel.run(*params, {.workers = 3, .schedule = mk::kDynamic, .trace = true}).ok());

  const auto& trace = kernel.last_trace();
  testing::expect_each_task_traced_once(trace, static_cast<size_t>(b * 4 + b), 3);  // every partial and final tile

  const auto path = std::filesystem::temp_directory_path() / ("eventide_trace_" + std::to_string(getpid()) + ".json");
  Status written = mk::write_chrome_trace(path.string(), trace, [&](int group, int64_t linear) {
    return MK::task_name(*params, group, linear);
  });
  ASSERT_TRUE(written.ok()) << written.message();
  std::ifstream in(path);
  const auto json = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  bool found = false;
  for (const auto& event : json["traceEvents"]) found = found || event["name"] == "final(4)";
  EXPECT_TRUE(found) << json.dump().substr(0, 400);

  ASSERT_TRUE(kernel.run(*params, {.workers = 3}).ok());
  EXPECT_TRUE(kernel.last_trace().empty()) << "tracing is off unless asked for";
}

}  // namespace
}  // namespace evt
