// The executor's safety nets, with the verifier bypassed: wrong counts stop with a report that
// names the stuck event, never a hang; bad run-time data is an error naming the buffer.

#include <gtest/gtest.h>

#include <chrono>

#include "support/graph_fixtures.h"

namespace evt {
namespace {

using runtime::cpu::ExecOptions;
using runtime::cpu::Schedule;

// The split-K graph with E's wait count replaced (no verifier).
ir::Graph splitk_with_count(int count) {
  auto g = ir::load_graph_file(testing::example_path("splitk.evt"));
  EXPECT_TRUE(g.ok()) << g.status().message();
  g->events[0].wait.count = count;
  return std::move(g).value();
}

Expected<runtime::cpu::ExecStats> run(const ir::Graph& g, int64_t b, const ExecOptions& options) {
  auto tg = ir::instantiate(g, {{"B", b}});
  EXPECT_TRUE(tg.ok()) << tg.status().message();
  auto store = testing::seeded_store(*tg, 1);
  return runtime::cpu::execute(*tg, kernels::Registry::builtins(), *store, options);
}

TEST(Watchdog, StaticRunWithTooHighCountStopsWithReport) {
  const ir::Graph g = splitk_with_count(5);
  const auto start = std::chrono::steady_clock::now();
  auto stats = run(g, 3, {.schedule = Schedule::kStatic, .workers = 4, .watchdog = std::chrono::milliseconds(200)});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(stats.ok());
  const std::string& msg = stats.status().message();
  EXPECT_NE(msg.find("no progress for 200 ms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("waits on E["), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 of 5 notifications missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("awaited by final("), std::string::npos) << msg;
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST(Watchdog, StaticChaosRunWithTooHighCountStops) {
  const ir::Graph g = splitk_with_count(5);
  auto stats = run(g, 9, {.schedule = Schedule::kStatic, .workers = 3, .chaos_seed = 11,
                          .watchdog = std::chrono::milliseconds(150)});
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("events that never fired"), std::string::npos) << stats.status().message();
}

TEST(Watchdog, DynamicRunWithTooHighCountReportsUnreleasedTasks) {
  const ir::Graph g = splitk_with_count(5);
  auto stats = run(g, 4, {.schedule = Schedule::kDynamic, .workers = 4, .watchdog = std::chrono::milliseconds(200)});
  ASSERT_FALSE(stats.ok());
  const std::string& msg = stats.status().message();
  EXPECT_NE(msg.find("4 tasks not run"), std::string::npos) << msg;
  EXPECT_NE(msg.find("E[0]: 1 of 5 notifications missing; awaited by final(0)"), std::string::npos) << msg;
}

TEST(Executor, TooLowCountIsOverNotification) {
  const ir::Graph g = splitk_with_count(3);
  for (Schedule s : {Schedule::kStatic, Schedule::kDynamic}) {
    auto stats = run(g, 2, {.schedule = s, .workers = 2});
    ASSERT_FALSE(stats.ok());
    EXPECT_NE(stats.status().message().find("received more notifications than its wait count 3"), std::string::npos)
        << stats.status().message();
  }
}

TEST(Executor, SerialRunRejectsUnsatisfiableWaitAtOnce) {
  const ir::Graph g = splitk_with_count(5);
  auto tg = ir::instantiate(g, {{"B", 2}});
  ASSERT_TRUE(tg.ok());
  auto store = testing::seeded_store(*tg, 1);
  auto stats = runtime::cpu::execute_serial(*tg, kernels::Registry::builtins(), *store);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("final(0): waits on E[0], which has not fired"), std::string::npos)
      << stats.status().message();
}

constexpr const char* kNotifierDoesNotWaitForSetter = R"G(
B = dim()
idx = buffer((B,), i32)
G = event((8,), wait_count=runtime)
setter = call_device(noop, tiles=(1,), sets=(G,))
notifier = call_device(noop, tiles=(B,), out_edges={G: "i->idx[i]"})
)G";

TEST(Executor, NotifyBeforeRuntimeCountIsSetIsAnError) {
  auto g = ir::parse_graph(kNotifierDoesNotWaitForSetter);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto tg = ir::instantiate(*g, {{"B", 2}});
  ASSERT_TRUE(tg.ok()) << tg.status().message();
  auto store = testing::seeded_store(*tg, 1);
  auto stats = runtime::cpu::execute_serial(*tg, testing::registry_with_noop(), *store);
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("before its run-time wait count was set (by task group setter)"),
            std::string::npos)
      << stats.status().message();
}

TEST(Executor, IndexOutOfEventShapeNamesEdgeAndTile) {
  auto g = ir::parse_graph(R"G(
B = dim()
idx = buffer((B,), i32)
E = event((4,), wait_count=1)
notifier = call_device(noop, tiles=(B,), out_edges={E: "i->idx[i]+4"})
)G");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto tg = ir::instantiate(*g, {{"B", 1}});
  ASSERT_TRUE(tg.ok()) << tg.status().message();
  auto store = testing::seeded_store(*tg, 1);  // idx in [0, 8): idx+4 >= 4 always
  auto stats = runtime::cpu::execute(*tg, testing::registry_with_noop(), *store, {.schedule = Schedule::kStatic, .workers = 1});
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("task group notifier, edge {E: \"i->idx[i]+4\"}, tile (0)"), std::string::npos)
      << stats.status().message();
}

TEST(Executor, DynamicRejectsDataDependentInEdgeWithoutInverse) {
  auto g = ir::parse_graph(R"G(
B = dim()
idx = buffer((B,), i32)
E = event((8,))
producer = call_device(noop, tiles=(8,), out_edges={E: "i->i"})
consumer = call_device(noop, tiles=(B,), in_edges={E: "i->idx[i]"})
)G");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto tg = ir::instantiate(*g, {{"B", 3}});
  ASSERT_TRUE(tg.ok()) << tg.status().message();
  auto store = testing::seeded_store(*tg, 1);
  auto dynamic = runtime::cpu::execute(*tg, testing::registry_with_noop(), *store, {.schedule = Schedule::kDynamic});
  ASSERT_FALSE(dynamic.ok());
  EXPECT_NE(dynamic.status().message().find("has no inverse"), std::string::npos) << dynamic.status().message();
  // Statically it is fine: each consumer resolves its event from the (input) index buffer.
  auto fixed = runtime::cpu::execute(*tg, testing::registry_with_noop(), *store, {.schedule = Schedule::kStatic});
  EXPECT_TRUE(fixed.ok()) << fixed.status().message();
}

TEST(Executor, UnknownTileFunctionIsAnError) {
  auto g = ir::parse_graph("t = call_device(nonexistent, tiles=(2,))\n");
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto tg = ir::instantiate(*g, {});
  ASSERT_TRUE(tg.ok());
  runtime::cpu::BufferStore store(*tg);
  auto stats = runtime::cpu::execute(*tg, kernels::Registry::builtins(), store, {});
  ASSERT_FALSE(stats.ok());
  EXPECT_NE(stats.status().message().find("unknown tile function 'nonexistent'"), std::string::npos);
}

// A buffer bound to caller-owned memory is read and written there (the decode step's KV cache);
// memory of the wrong size is refused by buffer name.
TEST(BufferStore, ExternalMemoryIsUsedInPlaceAndSizeChecked) {
  const ir::Graph g = testing::compiled_example("splitk.evt", {{"B", 3}});
  auto tg = ir::instantiate(g, {{"B", 3}});
  ASSERT_TRUE(tg.ok()) << tg.status().message();
  runtime::cpu::BufferStore store(*tg);
  const int c = g.buffer_index("C");
  std::vector<float> mine(96, -1.0f);
  EXPECT_FALSE(store.bind_external(c, std::as_writable_bytes(std::span(mine).first(95))).ok());
  ASSERT_TRUE(store.bind_external(c, std::as_writable_bytes(std::span(mine))).ok());
  EXPECT_EQ(store.view(c).data, mine.data());
  store.fill_inputs(7);
  ASSERT_TRUE(runtime::cpu::execute(*tg, kernels::Registry::builtins(), store, {}).ok());
  const float* a = static_cast<const float*>(store.view(g.buffer_index("A")).data);
  float row0 = 0;
  for (int k = 0; k < 128; ++k) row0 += a[k];
  EXPECT_NEAR(mine[0], row0, 1e-3);  // C[0] = sum of A's row 0, written into `mine`
}

}  // namespace
}  // namespace evt
