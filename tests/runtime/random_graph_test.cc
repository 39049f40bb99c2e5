// Property tests over random DAG-shaped event graphs and random bindings: the verifier accepts
// them, the text form round-trips them, and static, dynamic and chaos schedules all produce the
// serial run's result, with no deadlock.
//
// Every task computes a hash of its id and of the values of the tasks it depends on, which an
// oracle here derives from the map kinds alone, without the IR. A task that reads a dependency
// before it was written sees the poison pattern and records a mark, so an early start shows up
// both in the serial run (a wrong topological order) and in parallel ones (a wrong schedule).

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "support/graph_fixtures.h"

namespace evt {
namespace {

using ir::Expr;

constexpr int64_t kPoison = 0x7f7f7f7f7f7f7f7f;  // BufferStore's integer poison
constexpr int64_t kMark = -1;                    // "a dependency was read before it was written"

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// reads (deps: tasks x D, meta: [first_id, ext0, ext1]), writes (vals: all tasks).
void mix(const kernels::TileArgs& args) {
  const kernels::BufferView &deps = args.reads[0], &meta = args.reads[1];
  int64_t* vals = args.writes[0].as<int64_t>();
  const int64_t* m = meta.as<const int64_t>();
  const int64_t linear = args.tile.size() == 2 ? args.tile[0] * m[2] + args.tile[1] : args.tile[0];
  const int64_t id = m[0] + linear;
  uint64_t acc = splitmix(static_cast<uint64_t>(id));
  bool early = false;
  for (int64_t k = 0; k < deps.dim(1); ++k) {
    const int64_t d = deps.as<const int64_t>()[linear * deps.dim(1) + k];
    if (d < 0) continue;
    const int64_t v = vals[d];
    early = early || v == kPoison;
    acc = acc * 31 + static_cast<uint64_t>(v);
  }
  vals[id] = early ? kMark : static_cast<int64_t>(acc & 0x3fffffffffffffffull);
}

const kernels::Registry& mix_registry() {
  static const kernels::Registry registry = [] {
    kernels::Registry r;
    r.add({.name = "mix", .summary = "hash of the task id and its dependencies' values", .num_reads = 2,
           .num_writes = 1, .cpu = mix});
    return r;
  }();
  return registry;
}

// --- the random graph family

enum class Extent { kB, kBPlus1, kThree, kTwoB };
enum class ProducerMap { kIdentity, kProject, kHalve, kConst };
enum class ConsumerMap { kFirst, kSlice, kMod };

struct GroupSpec {
  int rank;
  Extent ext0;
  int64_t ext1;  // rank 2 only
};

struct EdgeSpec {
  int producer, consumer;
  ProducerMap pmap;
  ConsumerMap cmap;
  bool explicit_count;
};

Expr extent_expr(Extent e) {
  const Expr b = Expr::var("B");
  switch (e) {
    case Extent::kB: return b;
    case Extent::kBPlus1: return b + 1;
    case Extent::kThree: return 3;
    case Extent::kTwoB: return 2 * b;
  }
  return 0;
}

// Deliberately not evaluate(extent_expr(e)): the oracle computes everything without the IR.
int64_t extent_value(Extent e, int64_t b) {
  switch (e) {
    case Extent::kB: return b;
    case Extent::kBPlus1: return b + 1;
    case Extent::kThree: return 3;
    case Extent::kTwoB: return 2 * b;
  }
  return 0;
}

struct Spec {
  int64_t b;
  std::vector<GroupSpec> groups;
  std::vector<EdgeSpec> edges;

  std::vector<int64_t> grid(int g) const {
    std::vector<int64_t> v{extent_value(groups[g].ext0, b)};
    if (groups[g].rank == 2) v.push_back(groups[g].ext1);
    return v;
  }
  std::vector<Expr> grid_expr(int g) const {
    std::vector<Expr> v{extent_expr(groups[g].ext0)};
    if (groups[g].rank == 2) v.push_back(groups[g].ext1);
    return v;
  }
  int64_t tasks(int g) const {
    int64_t n = 1;
    for (int64_t x : grid(g)) n *= x;
    return n;
  }
  // The event's shape: what the producer map covers.
  std::vector<Expr> event_shape(const EdgeSpec& e) const {
    switch (e.pmap) {
      case ProducerMap::kIdentity: return grid_expr(e.producer);
      case ProducerMap::kProject: return {grid_expr(e.producer)[0]};
      case ProducerMap::kHalve: return {Expr::var("B")};
      case ProducerMap::kConst: return {1};
    }
    return {};
  }
  std::vector<int64_t> event_shape_value(const EdgeSpec& e) const {
    auto g = grid(e.producer);
    switch (e.pmap) {
      case ProducerMap::kIdentity: return g;
      case ProducerMap::kProject: return {g[0]};
      case ProducerMap::kHalve: return {b};
      case ProducerMap::kConst: return {1};
    }
    return {};
  }
};

rc::Gen<Spec> gen_spec() {
  return rc::gen::exec([] {
    Spec s;
    s.b = *rc::gen::inRange<int64_t>(1, 13);
    const int n = *rc::gen::inRange(1, 7);
    for (int g = 0; g < n; ++g) {
      GroupSpec gs;
      gs.rank = *rc::gen::inRange(1, 3);
      gs.ext0 = static_cast<Extent>(*rc::gen::inRange(0, 4));
      gs.ext1 = *rc::gen::inRange<int64_t>(1, 5);
      s.groups.push_back(gs);
    }
    for (int c = 1; c < n; ++c) {
      const int preds = *rc::gen::inRange(0, std::min(c, 3) + 1);
      std::set<int> chosen;
      for (int k = 0; k < preds; ++k) chosen.insert(*rc::gen::inRange(0, c));
      for (int p : chosen) {
        EdgeSpec e{p, c, static_cast<ProducerMap>(*rc::gen::inRange(0, 4)),
                   static_cast<ConsumerMap>(*rc::gen::inRange(0, 3)), *rc::gen::arbitrary<bool>()};
        if (e.pmap == ProducerMap::kProject && s.groups[p].rank != 2) e.pmap = ProducerMap::kIdentity;
        if (e.pmap == ProducerMap::kHalve && s.groups[p].ext0 != Extent::kTwoB) e.pmap = ProducerMap::kConst;
        s.edges.push_back(e);
      }
    }
    return s;
  });
}

// --- the graph, built through the IR

ir::EdgeMap producer_map(const Spec& s, const EdgeSpec& e) {
  const int rank = s.groups[e.producer].rank;
  ir::EdgeMap m;
  m.vars = rank == 2 ? std::vector<std::string>{"i", "j"} : std::vector<std::string>{"i"};
  const Expr i = Expr::var("i");
  switch (e.pmap) {
    case ProducerMap::kIdentity:
      for (const auto& v : m.vars) m.coords.push_back(ir::Coord::scalar(Expr::var(v)));
      break;
    case ProducerMap::kProject: m.coords.push_back(ir::Coord::scalar(i)); break;
    case ProducerMap::kHalve: m.coords.push_back(ir::Coord::scalar(ir::floordiv(i, 2))); break;
    case ProducerMap::kConst: m.coords.push_back(ir::Coord::scalar(0)); break;
  }
  return m;
}

ir::EdgeMap consumer_map(const Spec& s, const EdgeSpec& e) {
  const int rank = s.groups[e.consumer].rank;
  const std::vector<Expr> shape = s.event_shape(e);
  ir::EdgeMap m;
  m.vars = rank == 2 ? std::vector<std::string>{"i", "j"} : std::vector<std::string>{"i"};
  for (size_t k = 0; k < shape.size(); ++k) {
    switch (e.cmap) {
      case ConsumerMap::kFirst: m.coords.push_back(ir::Coord::scalar(0)); break;
      case ConsumerMap::kSlice: m.coords.push_back(ir::Coord::slice()); break;
      case ConsumerMap::kMod:
        m.coords.push_back(ir::Coord::scalar(ir::mod(Expr::var(m.vars[std::min<size_t>(k, rank - 1)]), shape[k])));
        break;
    }
  }
  return m;
}

int64_t notifications_per_element(const Spec& s, const EdgeSpec& e) {
  const auto g = s.grid(e.producer);
  switch (e.pmap) {
    case ProducerMap::kIdentity: return 1;
    case ProducerMap::kProject: return g[1];
    case ProducerMap::kHalve: return 2 * (g.size() == 2 ? g[1] : 1);
    case ProducerMap::kConst: return s.tasks(e.producer);
  }
  return 0;
}

int64_t first_id(const Spec& s, int g) {
  int64_t id = 0;
  for (int k = 0; k < g; ++k) id += s.tasks(k);
  return id;
}

// Dependencies of every task, from the map kinds alone: deps[g][linear] = producer task ids.
std::vector<std::vector<std::vector<int64_t>>> oracle_deps(const Spec& s) {
  std::vector<std::vector<std::vector<int64_t>>> deps(s.groups.size());
  for (size_t g = 0; g < s.groups.size(); ++g) deps[g].resize(s.tasks(static_cast<int>(g)));
  for (const EdgeSpec& e : s.edges) {
    const auto shape = s.event_shape_value(e);
    const auto pg = s.grid(e.producer), cg = s.grid(e.consumer);
    auto coords = [](int64_t linear, const std::vector<int64_t>& grid) {
      return grid.size() == 2 ? std::vector<int64_t>{linear / grid[1], linear % grid[1]} : std::vector<int64_t>{linear};
    };
    auto produced = [&](int64_t linear) -> std::vector<int64_t> {
      auto c = coords(linear, pg);
      switch (e.pmap) {
        case ProducerMap::kIdentity: return c;
        case ProducerMap::kProject: return {c[0]};
        case ProducerMap::kHalve: return {c[0] / 2};
        case ProducerMap::kConst: return {0};
      }
      return {};
    };
    auto awaited = [&](int64_t linear, const std::vector<int64_t>& element) {
      auto c = coords(linear, cg);
      for (size_t k = 0; k < shape.size(); ++k) {
        if (e.cmap == ConsumerMap::kFirst && element[k] != 0) return false;
        if (e.cmap == ConsumerMap::kMod && element[k] != c[std::min(k, c.size() - 1)] % shape[k]) return false;
      }
      return true;  // kSlice awaits every element
    };
    for (int64_t ct = 0; ct < s.tasks(e.consumer); ++ct) {
      for (int64_t pt = 0; pt < s.tasks(e.producer); ++pt) {
        if (awaited(ct, produced(pt))) deps[e.consumer][ct].push_back(first_id(s, e.producer) + pt);
      }
    }
  }
  for (auto& group : deps) {
    for (auto& d : group) std::sort(d.begin(), d.end());
  }
  return deps;
}

ir::Graph build_graph(const Spec& s, const std::vector<std::vector<std::vector<int64_t>>>& deps) {
  ir::Graph g;
  g.name = "random";
  g.dims = {"B"};
  int64_t total = 0;
  for (size_t k = 0; k < s.groups.size(); ++k) total += s.tasks(static_cast<int>(k));
  g.buffers.push_back({"vals", {total}, ir::DType::kI64});
  for (size_t k = 0; k < s.groups.size(); ++k) {
    int64_t width = 1;
    for (const auto& d : deps[k]) width = std::max<int64_t>(width, static_cast<int64_t>(d.size()));
    g.buffers.push_back({fmt::format("deps{}", k), {s.tasks(static_cast<int>(k)), width}, ir::DType::kI64});
    g.buffers.push_back({fmt::format("meta{}", k), {3}, ir::DType::kI64});
    g.groups.push_back({.name = fmt::format("g{}", k), .function = "mix", .tiles = s.grid_expr(static_cast<int>(k)),
                        .reads = {fmt::format("deps{}", k), fmt::format("meta{}", k)}, .writes = {"vals"}});
  }
  for (size_t k = 0; k < s.edges.size(); ++k) {
    const EdgeSpec& e = s.edges[k];
    const std::string name = fmt::format("E{}", k);
    ir::WaitCount wait;
    if (e.explicit_count) wait = {ir::WaitCount::Kind::kExplicit, notifications_per_element(s, e)};
    g.events.push_back({name, s.event_shape(e), wait});
    g.groups[e.producer].out_edges.push_back({name, producer_map(s, e)});
    g.groups[e.consumer].in_edges.push_back({name, consumer_map(s, e)});
  }
  return g;
}

void fill_oracle(runtime::cpu::BufferStore& store, const ir::Graph& g, const Spec& s,
                 const std::vector<std::vector<std::vector<int64_t>>>& deps) {
  for (size_t k = 0; k < s.groups.size(); ++k) {
    auto d = store.mutable_bytes(g.buffer_index(fmt::format("deps{}", k)));
    const int64_t width = static_cast<int64_t>(d.size() / 8) / std::max<int64_t>(1, s.tasks(static_cast<int>(k)));
    std::vector<int64_t> table(d.size() / 8, -1);
    for (size_t t = 0; t < deps[k].size(); ++t) std::copy(deps[k][t].begin(), deps[k][t].end(), table.begin() + t * width);
    std::memcpy(d.data(), table.data(), d.size());
    const auto grid = s.grid(static_cast<int>(k));
    const int64_t meta[3] = {first_id(s, static_cast<int>(k)), grid[0], grid.size() == 2 ? grid[1] : 1};
    std::memcpy(store.mutable_bytes(g.buffer_index(fmt::format("meta{}", k))).data(), meta, sizeof meta);
  }
}

RC_GTEST_PROP(RandomGraphs, EveryScheduleMatchesTheSerialRun, ()) {
  const Spec spec = *gen_spec();
  const auto deps = oracle_deps(spec);
  ir::Graph g = build_graph(spec, deps);
  const ir::Binding binding{{"B", spec.b}};

  auto reparsed = ir::parse_graph(ir::print_graph(g));
  RC_ASSERT(reparsed.ok());
  RC_ASSERT(*reparsed == g);

  compiler::PassContext ctx{{binding}, &mix_registry(), true, {}};
  Status verified = compiler::run_pipeline(g, ctx);
  RC_ASSERT(verified.ok());

  auto tg = ir::instantiate(g, binding);
  RC_ASSERT(tg.ok());
  auto fresh = [&] {
    auto store = testing::seeded_store(*tg, 1);
    fill_oracle(*store, g, spec, deps);
    return store;
  };
  auto serial_store = fresh();
  auto serial = runtime::cpu::execute_serial(*tg, mix_registry(), *serial_store);
  RC_ASSERT(serial.ok());
  const auto* vals = reinterpret_cast<const int64_t*>(serial_store->bytes(g.buffer_index("vals")).data());
  for (int64_t t = 0; t < tg->num_tasks(); ++t) RC_ASSERT(vals[t] != kMark && vals[t] != kPoison);

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
    auto store = fresh();
    auto stats = runtime::cpu::execute(*tg, mix_registry(), *store, mode);
    RC_ASSERT(stats.ok());
    RC_ASSERT(stats->tasks_run == tg->num_tasks());
    RC_ASSERT(store->compare_outputs(*serial_store).ok());
  }
}

// The oracle itself: in the split-K shape, each final tile depends on exactly its four partials.
TEST(RandomGraphs, OracleMatchesSplitKDependencies) {
  Spec s{3, {{2, Extent::kB, 4}, {1, Extent::kB, 1}}, {{0, 1, ProducerMap::kProject, ConsumerMap::kMod, true}}};
  const auto deps = oracle_deps(s);
  EXPECT_EQ(deps[1][0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(deps[1][2], (std::vector<int64_t>{8, 9, 10, 11}));
}

}  // namespace
}  // namespace evt
