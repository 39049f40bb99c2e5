#pragma once
// Helpers shared by the tests: loading example graphs, compiling them for a binding, and
// running them with fresh seeded stores.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compiler/pipeline.h"
#include "ir/text_form.h"
#include "ir/tile_graph.h"
#include "runtime/cpu/executor.h"
#include "runtime/megakernel/trace.h"
#include "support/random_graph.h"
#include "support/source_dir.h"

namespace evt::testing {

inline std::string example_path(const std::string& name) { return source_dir() + "/examples/" + name; }

inline std::string test_graph_path(const std::string& name) {
  return source_dir() + "/tests/runtime/graphs/" + name;
}

// Infers and verifies `g` for `bindings`; fails the test on any error.
inline ir::Graph compiled(ir::Graph g, const std::vector<ir::Binding>& bindings) {
  compiler::PassContext ctx{bindings, &kernels::Registry::builtins(), true, {}};
  Status s = compiler::run_pipeline(g, ctx);
  EXPECT_TRUE(s.ok()) << g.name << ": " << s.message();
  return g;
}

// Loads, infers and verifies a graph file for `binding`; fails the test on any error.
inline ir::Graph compiled_graph(const std::string& path, const ir::Binding& binding) {
  auto g = ir::load_graph_file(path);
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return {};
  return compiled(std::move(g).value(), {binding});
}

inline ir::Graph compiled_example(const std::string& name, const ir::Binding& binding) {
  return compiled_graph(example_path(name), binding);
}

// The built-ins plus `noop`, a tile function that does nothing, for graphs that test scheduling.
inline const kernels::Registry& registry_with_noop() {
  static const kernels::Registry registry = [] {
    kernels::Registry r = kernels::Registry::builtins();
    r.add({.name = "noop", .summary = "does nothing", .cpu = [](const kernels::TileArgs&) {}});
    return r;
  }();
  return registry;
}

// Seeded inputs and poisoned outputs. A graph of `mix` tasks gets its dependency tables and
// permutations instead (random_graph.h): random indices would make no schedule meaningful.
inline std::unique_ptr<runtime::cpu::BufferStore> seeded_store(const ir::TileGraph& tg, uint64_t seed) {
  auto store = std::make_unique<runtime::cpu::BufferStore>(tg);
  store->fill_inputs(seed);
  store->poison_outputs();
  if (runs_mix(tg.graph())) fill_mix_inputs(tg, *store);
  return store;
}

template <typename T>
const T* buffer_data(const runtime::cpu::BufferStore& store, const ir::Graph& g, const std::string& name) {
  return reinterpret_cast<const T*>(store.bytes(g.buffer_index(name)).data());
}

// The bindings 1..64 in a seeded random order, then the first again: one megakernel instance
// runs them all, so its scheduler memory carries over between launches of different sizes.
inline std::vector<int64_t> shuffled_bindings(uint64_t seed) {
  std::vector<int64_t> order(64);
  std::iota(order.begin(), order.end(), 1);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  order.push_back(order.front());
  return order;
}

// `dim` bound to each of `values`.
inline std::vector<ir::Binding> bindings_of(const std::string& dim, const std::vector<int64_t>& values) {
  std::vector<ir::Binding> bindings;
  for (int64_t v : values) bindings.push_back({{dim, v}});
  return bindings;
}

// The binding's values in the graph's dim order: a megakernel's dims argument.
inline std::vector<int64_t> dim_values(const ir::Graph& g, const ir::Binding& binding) {
  std::vector<int64_t> v;
  for (const auto& d : g.dims) v.push_back(binding.at(d));
  return v;
}

// Names the typed tests of the build-time random graphs (random_graphs.h) after their seeds.
struct SeedName {
  template <class G>
  static std::string GetName(int) {
    return "random" + std::to_string(G::kSeed);
  }
};

// A traced launch recorded each of its `tasks` tasks exactly once, in time order, on a valid worker,
// its barriers (if any) in order between the end of its wait and its end.
inline void expect_each_task_traced_once(const std::vector<mk::TraceEvent>& trace, size_t tasks, int workers) {
  ASSERT_EQ(trace.size(), tasks);
  std::set<std::pair<int, int64_t>> seen;
  for (const auto& e : trace) {
    EXPECT_LE(e.start_ns, e.waited_ns);
    EXPECT_LE(e.waited_ns, e.end_ns);
    uint64_t last = e.waited_ns;
    for (const uint64_t t : e.barriers_ns) {
      EXPECT_LE(last, t);
      last = t;
    }
    EXPECT_LE(last, e.end_ns);
    EXPECT_LE(e.end_ns, e.recorded_ns);
    EXPECT_LT(e.worker, workers);
    seen.insert({e.group, e.linear});
  }
  EXPECT_EQ(seen.size(), trace.size());
  // Between two tasks of a worker, the hand-out barrier (where there is one) comes after the
  // first one's record was written and before the second one starts.
  std::vector<const mk::TraceEvent*> order;
  for (const auto& e : trace) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const mk::TraceEvent* a, const mk::TraceEvent* b) {
    return a->worker != b->worker ? a->worker < b->worker : a->start_ns < b->start_ns;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const mk::TraceEvent &before = *order[i - 1], &after = *order[i];
    if (before.worker != after.worker || after.handout_ns == 0) continue;
    EXPECT_LE(before.recorded_ns, after.handout_ns);
    EXPECT_LE(after.handout_ns, after.start_ns);
  }
}

}  // namespace evt::testing
