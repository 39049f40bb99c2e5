// Per-task overhead of the CPU executor, static vs dynamic scheduling, on empty tiles.
//
//   independent: tiles=(N,), no events: pure dispatch cost (queue walk or ready-queue pop).
//   splitk:      the seeds' split-K shape, partial (N/5, 4) -> E[i] -> final (N/5,): adds one
//                notify per partial tile and one wait (static) or release + push (dynamic) per final tile.
//
// Counters: per_task = wall time of one execute() / tasks. execute() includes starting the
// worker threads and, for static scheduling, the list scheduler; at these sizes those amortize.

#include <benchmark/benchmark.h>

#include "ir/tile_graph.h"
#include "runtime/cpu/executor.h"

namespace {

using namespace evt;

void empty_tile(const kernels::TileArgs&) {}

const kernels::Registry& bench_registry() {
  static const kernels::Registry registry = [] {
    kernels::Registry r;
    r.add({.name = "empty", .summary = "does nothing", .num_reads = 0, .num_writes = 0, .cpu = empty_tile});
    return r;
  }();
  return registry;
}

ir::EdgeMap map(std::vector<std::string> vars, std::vector<ir::Expr> coords) {
  ir::EdgeMap m;
  m.vars = std::move(vars);
  for (auto& c : coords) m.coords.push_back(ir::Coord::scalar(c));
  return m;
}

ir::Graph independent_graph() {
  ir::Graph g;
  g.dims = {"N"};
  g.groups.push_back({.name = "work", .function = "empty", .tiles = {ir::Expr::var("N")}});
  return g;
}

ir::Graph splitk_graph() {
  const ir::Expr n = ir::Expr::var("N"), i = ir::Expr::var("i");
  ir::Graph g;
  g.dims = {"N"};
  g.events.push_back({.name = "E", .shape = {n}, .wait = {ir::WaitCount::Kind::kExplicit, 4}});
  g.groups.push_back({.name = "partial", .function = "empty", .tiles = {n, 4},
                      .out_edges = {{"E", map({"i", "j"}, {i})}}});
  g.groups.push_back({.name = "final", .function = "empty", .tiles = {n}, .in_edges = {{"E", map({"i"}, {i})}}});
  return g;
}

void run(benchmark::State& state, const ir::Graph& g, int64_t n, runtime::cpu::Schedule schedule, int workers) {
  auto tg = ir::instantiate(g, {{"N", n}});
  if (!tg.ok()) return state.SkipWithError(tg.status().message().c_str());
  runtime::cpu::BufferStore store(*tg);
  runtime::cpu::ExecOptions options{.schedule = schedule, .workers = workers};
  for (auto _ : state) {
    auto stats = runtime::cpu::execute(*tg, bench_registry(), store, options);
    if (!stats.ok()) return state.SkipWithError(stats.status().message().c_str());
  }
  state.counters["tasks"] = static_cast<double>(tg->num_tasks());
  // Seconds per task, printed with an SI suffix (e.g. 250n = 250 ns).
  state.counters["per_task"] = benchmark::Counter(static_cast<double>(tg->num_tasks()),
                                                  benchmark::Counter::kIsIterationInvariantRate |
                                                      benchmark::Counter::kInvert);
}

void BM_Independent(benchmark::State& state) {
  static const ir::Graph g = independent_graph();
  run(state, g, state.range(0), static_cast<runtime::cpu::Schedule>(state.range(1)), static_cast<int>(state.range(2)));
}

void BM_SplitK(benchmark::State& state) {
  static const ir::Graph g = splitk_graph();
  run(state, g, state.range(0) / 5, static_cast<runtime::cpu::Schedule>(state.range(1)), static_cast<int>(state.range(2)));
}

// Args: tasks, schedule (0 static, 1 dynamic), workers.
BENCHMARK(BM_Independent)->ArgNames({"tasks", "dynamic", "workers"})->ArgsProduct({{100000}, {0, 1}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SplitK)->ArgNames({"tasks", "dynamic", "workers"})->ArgsProduct({{100000}, {0, 1}, {1, 2}})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
