// Property tests over random DAG-shaped event graphs (support/random_graph.h) and random
// bindings: the verifier accepts them, the text form round-trips them, and static, dynamic and
// chaos schedules all produce the serial run's result, with no deadlock.
//
// Every task runs `mix`: a hash of its id and of the values of the tasks it depends on. The
// dependency tables come from the instantiated graph; an oracle here derives the same
// dependencies from the map kinds alone, without the IR. A task that reads a dependency before
// it was written sees the poison pattern and records a mark, so an early start shows up both in
// the serial run (a wrong topological order) and in parallel ones (a wrong schedule).

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "kernels/examples/mix_hash.h"
#include "support/graph_fixtures.h"

namespace evt {
namespace {

using testing::ConsumerMap;
using testing::ProducerMap;

RC_GTEST_PROP(RandomGraphs, EveryScheduleMatchesTheSerialRun, ()) {
  const testing::Spec spec = *testing::gen_spec();
  const testing::Dims dims{*rc::gen::inRange<int64_t>(1, 13), *rc::gen::inRange<int64_t>(1, 13)};
  ir::Graph g = testing::build_graph(spec, "random");
  const ir::Binding binding = dims.binding();

  auto reparsed = ir::parse_graph(ir::print_graph(g));
  RC_ASSERT(reparsed.ok());
  RC_ASSERT(*reparsed == g);

  compiler::PassContext ctx{{binding}, &kernels::Registry::builtins(), true, {}};
  Status verified = compiler::run_pipeline(g, ctx);
  RC_ASSERT(verified.ok());

  auto tg = ir::instantiate(g, binding);
  RC_ASSERT(tg.ok());
  auto serial_store = testing::seeded_store(*tg, 1);
  RC_ASSERT(testing::fill_mix_inputs(*tg, *serial_store) == testing::oracle_deps(spec, dims));
  auto serial = runtime::cpu::execute_serial(*tg, kernels::Registry::builtins(), *serial_store);
  RC_ASSERT(serial.ok());
  const auto* vals = testing::buffer_data<int64_t>(*serial_store, g, "vals");
  for (int64_t t = 0; t < tg->num_tasks(); ++t) RC_ASSERT(vals[t] != kernels::kMixEarly && vals[t] != kernels::kMixPoison);

  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const int workers = *rc::gen::inRange(1, 5);
  using runtime::cpu::Schedule;
  const runtime::cpu::ExecOptions modes[] = {
      {.schedule = Schedule::kStatic, .workers = workers},
      {.schedule = Schedule::kStatic, .workers = workers, .chaos_seed = seed},
      {.schedule = Schedule::kDynamic, .workers = workers, .chaos_seed = seed},
      {.schedule = Schedule::kDynamic, .workers = workers, .early_push = true, .chaos_seed = seed},
  };
  for (const auto& mode : modes) {
    auto store = testing::seeded_store(*tg, 1);
    auto stats = runtime::cpu::execute(*tg, kernels::Registry::builtins(), *store, mode);
    RC_ASSERT(stats.ok());
    RC_ASSERT(stats->tasks_run == tg->num_tasks());
    RC_ASSERT(store->compare_outputs(*serial_store).ok());
  }
}

// The oracle itself: in the split-K shape, each final tile depends on exactly its four partials.
TEST(RandomGraphs, OracleMatchesSplitKDependencies) {
  const testing::Spec s{{{{{1, 0, 0}, {0, 0, 4}}}, {{{1, 0, 0}}}}, {{0, 1, ProducerMap::kProject, ConsumerMap::kMatch, true}}};
  const auto deps = testing::oracle_deps(s, {3, 1});
  EXPECT_EQ(deps[12], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(deps[14], (std::vector<int64_t>{8, 9, 10, 11}));
}

// The same seed gives the same graph: the build-time graphs depend on nothing else.
TEST(RandomGraphs, SpecFromSeedIsDeterministic) {
  EXPECT_EQ(testing::build_time_graph(5), testing::build_time_graph(5));
}

}  // namespace
}  // namespace evt
