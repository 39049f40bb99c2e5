#include "support/random_graph.h"

#include <fmt/format.h>
#include <rapidcheck.h>

#include <algorithm>
#include <set>

#include "util/check.h"

namespace evt::testing {

using ir::Expr;

ir::Expr Size::expr() const {
  Expr e;
  auto add = [&](int64_t k, Expr x) {
    if (k == 0) return;
    if (k != 1) x = k * x;
    e = e.defined() ? e + x : x;
  };
  add(b, Expr::var("B"));
  add(w, Expr::var("W"));
  if (c != 0 || !e.defined()) add(1, c);
  return e;
}

Size operator*(Size x, Size y) {
  EVT_CHECK(x.is_const() || y.is_const()) << "the random-graph family keeps extents affine in B";
  return {x.b * y.c + y.b * x.c, x.w * y.c + y.w * x.c, x.c * y.c};
}

namespace {

constexpr Size kOne{0, 0, 1}, kTwo{0, 0, 2};
constexpr int64_t kBroadcastWidth = 3;

bool halvable(Size x) { return x.b % 2 == 0 && x.w % 2 == 0 && x.c % 2 == 0; }

// How a kMatch in-edge maps event coordinate k.
enum class Match { kVar, kHalf, kAll };

Match match(const Spec& s, const EdgeSpec& e, size_t k) {
  const std::vector<Size>& grid = s.groups[e.consumer].grid;
  const Size dim = s.event_shape(e)[k];
  if (k >= grid.size()) return Match::kAll;
  if (grid[k] == dim) return Match::kVar;
  if (grid[k] == dim * kTwo) return Match::kHalf;
  return Match::kAll;
}

bool sliced(const Spec& s, const EdgeSpec& e, size_t k) {
  return e.cmap == ConsumerMap::kSlice || (e.cmap == ConsumerMap::kMatch && match(s, e, k) == Match::kAll);
}

std::vector<std::string> tile_vars(int rank) {
  return rank == 2 ? std::vector<std::string>{"i", "j"} : std::vector<std::string>{"i"};
}

std::string perm_name(size_t edge) { return fmt::format("perm{}", edge); }

ir::EdgeMap producer_map(const Spec& s, const EdgeSpec& e, size_t index) {
  const std::vector<Size>& grid = s.groups[e.producer].grid;
  ir::EdgeMap m;
  m.vars = tile_vars(static_cast<int>(grid.size()));
  const Expr i = Expr::var("i");
  auto add = [&](Expr x) { m.coords.push_back(ir::Coord::scalar(std::move(x))); };
  switch (e.pmap) {
    case ProducerMap::kIdentity:
      for (const auto& v : m.vars) add(Expr::var(v));
      break;
    case ProducerMap::kProject: add(i); break;
    case ProducerMap::kHalve: add(ir::floordiv(i, 2)); break;
    case ProducerMap::kConst: add(0); break;
    case ProducerMap::kRotate:
      if (grid.size() == 2) {
        add(i);
        add(ir::mod(Expr::var("j") + 1, grid[1].expr()));
      } else {
        add(ir::mod(i + 1, grid[0].expr()));
      }
      break;
    case ProducerMap::kBroadcast:
      add(i);
      m.coords.push_back(ir::Coord::slice());
      break;
    case ProducerMap::kPermute: add(Expr::load(perm_name(index), {i})); break;
  }
  return m;
}

ir::EdgeMap consumer_map(const Spec& s, const EdgeSpec& e) {
  const int rank = static_cast<int>(s.groups[e.consumer].grid.size());
  const std::vector<Size> shape = s.event_shape(e);
  ir::EdgeMap m;
  m.vars = tile_vars(rank);
  for (size_t k = 0; k < shape.size(); ++k) {
    switch (e.cmap) {
      case ConsumerMap::kFirst: m.coords.push_back(ir::Coord::scalar(0)); break;
      case ConsumerMap::kSlice: m.coords.push_back(ir::Coord::slice()); break;
      case ConsumerMap::kMod:
        m.coords.push_back(
            ir::Coord::scalar(ir::mod(Expr::var(m.vars[std::min<size_t>(k, rank - 1)]), shape[k].expr())));
        break;
      case ConsumerMap::kMatch:
        switch (match(s, e, k)) {
          case Match::kVar: m.coords.push_back(ir::Coord::scalar(Expr::var(m.vars[k]))); break;
          case Match::kHalf: m.coords.push_back(ir::Coord::scalar(ir::floordiv(Expr::var(m.vars[k]), 2))); break;
          case Match::kAll: m.coords.push_back(ir::Coord::slice()); break;
        }
        break;
    }
  }
  return m;
}

std::vector<int64_t> values(const std::vector<Size>& sizes, const Dims& d) {
  std::vector<int64_t> v;
  for (Size x : sizes) v.push_back(x.value(d));
  return v;
}

std::vector<int64_t> unravel(int64_t linear, const std::vector<int64_t>& grid) {
  return grid.size() == 2 ? std::vector<int64_t>{linear / grid[1], linear % grid[1]} : std::vector<int64_t>{linear};
}

}  // namespace

Size Spec::tasks(int g) const {
  Size n = kOne;
  for (Size x : groups[g].grid) n = n * x;
  return n;
}

std::vector<Size> Spec::event_shape(const EdgeSpec& e) const {
  const std::vector<Size>& grid = groups[e.producer].grid;
  switch (e.pmap) {
    case ProducerMap::kIdentity:
    case ProducerMap::kRotate: return grid;
    case ProducerMap::kProject:
    case ProducerMap::kPermute: return {grid[0]};
    case ProducerMap::kHalve: return {{grid[0].b / 2, grid[0].w / 2, grid[0].c / 2}};
    case ProducerMap::kConst: return {kOne};
    case ProducerMap::kBroadcast: return {grid[0], {0, 0, kBroadcastWidth}};
  }
  return {};
}

Size Spec::notifications_per_element(const EdgeSpec& e) const {
  const std::vector<Size>& grid = groups[e.producer].grid;
  const Size columns = grid.size() == 2 ? grid[1] : kOne;
  switch (e.pmap) {
    case ProducerMap::kIdentity:
    case ProducerMap::kRotate:
    case ProducerMap::kPermute: return kOne;
    case ProducerMap::kProject:
    case ProducerMap::kBroadcast: return columns;
    case ProducerMap::kHalve: return kTwo * columns;
    case ProducerMap::kConst: return tasks(e.producer);
  }
  return {};
}

rc::Gen<Spec> gen_spec(const FamilyOptions& options) {
  return rc::gen::exec([options] {
    const Size extents[] = {{1, 0, 0}, {1, 0, 1}, {0, 0, 3}, {2, 0, 0}, {0, 1, 0}, {0, 1, 2}};  // B, B+1, 3, 2B, W, W+2
    Spec s;
    const int n = *rc::gen::inRange(options.min_groups, options.max_groups + 1);
    for (int g = 0; g < n; ++g) {
      const int rank = *rc::gen::inRange(1, 3);
      GroupSpec gs{{extents[*rc::gen::inRange(0, 6)]}};
      const int64_t columns = *rc::gen::inRange<int64_t>(1, 5);
      if (rank == 2) gs.grid.push_back({0, 0, columns});
      s.groups.push_back(gs);
    }
    for (int c = 1; c < n; ++c) {
      const int preds = *rc::gen::inRange(0, std::min(c, 3) + 1);
      std::set<int> chosen;
      for (int k = 0; k < preds; ++k) chosen.insert(*rc::gen::inRange(0, c));
      for (int p : chosen) {
        EdgeSpec e{p, c, static_cast<ProducerMap>(*rc::gen::inRange(0, 7)),
                   static_cast<ConsumerMap>(*rc::gen::inRange(0, 4)), *rc::gen::arbitrary<bool>()};
        const std::vector<Size>& grid = s.groups[p].grid;
        if (e.pmap == ProducerMap::kProject && grid.size() != 2) e.pmap = ProducerMap::kIdentity;
        if (e.pmap == ProducerMap::kHalve && !halvable(grid[0])) e.pmap = ProducerMap::kConst;
        if (e.pmap == ProducerMap::kPermute && grid.size() != 1) e.pmap = ProducerMap::kRotate;
        // Inference proves neither a wrap-around nor a data-dependent count.
        if (e.pmap == ProducerMap::kRotate || e.pmap == ProducerMap::kPermute) e.explicit_count = true;
        if (e.cmap == ConsumerMap::kMod && options.invertible_in_edges) e.cmap = ConsumerMap::kMatch;
        s.edges.push_back(e);
      }
    }
    for (GroupSpec& g : s.groups) g.dynamic = *rc::gen::arbitrary<bool>();
    // The ready queue finds a dynamic group's tasks through its in-edges' inverses, which % lacks.
    for (const EdgeSpec& e : s.edges) {
      if (e.cmap == ConsumerMap::kMod) s.groups[e.consumer].dynamic = false;
    }
    return s;
  });
}

Spec spec_from_seed(uint64_t seed, const FamilyOptions& options) {
  return gen_spec(options)(rc::Random(seed)).value();
}

ir::Graph build_graph(const Spec& s, const std::string& name) {
  ir::Graph g;
  g.name = name;
  g.dims = {"B", "W"};
  Size total;
  for (size_t k = 0; k < s.groups.size(); ++k) total = total + s.tasks(static_cast<int>(k));
  g.buffers.push_back({"vals", {total.expr()}, ir::DType::kI64});
  for (size_t k = 0; k < s.groups.size(); ++k) {
    // A task's row: its id, then at most (awaited elements x notifications each) per in-edge.
    Size width = kOne;
    for (const EdgeSpec& e : s.edges) {
      if (e.consumer != static_cast<int>(k)) continue;
      Size awaited = kOne;
      const std::vector<Size> shape = s.event_shape(e);
      for (size_t d = 0; d < shape.size(); ++d) {
        if (sliced(s, e, d)) awaited = awaited * shape[d];
      }
      width = width + awaited * s.notifications_per_element(e);
    }
    std::vector<Expr> table;
    for (Size x : s.groups[k].grid) table.push_back(x.expr());
    table.push_back(width.expr());
    g.buffers.push_back({fmt::format("deps{}", k), table, ir::DType::kI64});
    std::vector<Expr> tiles;
    for (Size x : s.groups[k].grid) tiles.push_back(x.expr());
    g.groups.push_back({.name = fmt::format("g{}", k), .function = "mix", .tiles = tiles,
                        .reads = {fmt::format("deps{}", k)}, .writes = {"vals"},
                        .schedule = s.groups[k].dynamic ? ir::GroupSchedule::kDynamic : ir::GroupSchedule::kStatic});
  }
  for (size_t k = 0; k < s.edges.size(); ++k) {
    const EdgeSpec& e = s.edges[k];
    if (e.pmap == ProducerMap::kPermute) {
      g.buffers.push_back({perm_name(k), {s.groups[e.producer].grid[0].expr()}, ir::DType::kI32});
    }
    const std::string event = fmt::format("E{}", k);
    ir::WaitCount wait;
    if (e.explicit_count) wait = {ir::WaitCount::Kind::kExplicit, s.notifications_per_element(e).expr()};
    std::vector<Expr> shape;
    for (Size x : s.event_shape(e)) shape.push_back(x.expr());
    g.events.push_back({event, shape, wait});
    g.groups[e.producer].out_edges.push_back({event, producer_map(s, e, k)});
    g.groups[e.consumer].in_edges.push_back({event, consumer_map(s, e)});
  }
  return g;
}

ir::Graph build_time_graph(uint64_t seed) {
  return build_graph(spec_from_seed(seed, kBuildTimeFamily), fmt::format("random{}", seed));
}

std::vector<ir::Binding> build_time_bindings() {
  // Ones, odd sizes and a large one; the last repeats the first, after the counters of larger
  // launches.
  const Dims dims[] = {{1, 1}, {3, 1}, {1, 4}, {5, 7}, {17, 2}, {2, 13}, {1, 1}};
  std::vector<ir::Binding> bindings;
  for (const Dims& d : dims) bindings.push_back(d.binding());
  return bindings;
}

std::vector<std::vector<int64_t>> oracle_deps(const Spec& s, const Dims& b) {
  std::vector<int64_t> first{0};
  for (size_t g = 0; g < s.groups.size(); ++g) first.push_back(first.back() + s.tasks(static_cast<int>(g)).value(b));
  std::vector<std::vector<int64_t>> deps(first.back());
  for (const EdgeSpec& e : s.edges) {
    const std::vector<int64_t> shape = values(s.event_shape(e), b);
    const std::vector<int64_t> pg = values(s.groups[e.producer].grid, b), cg = values(s.groups[e.consumer].grid, b);
    auto produced = [&](int64_t linear) -> std::vector<std::vector<int64_t>> {
      const auto c = unravel(linear, pg);
      switch (e.pmap) {
        case ProducerMap::kIdentity: return {c};
        case ProducerMap::kProject: return {{c[0]}};
        case ProducerMap::kHalve: return {{c[0] / 2}};
        case ProducerMap::kConst: return {{0}};
        case ProducerMap::kRotate:
          return {c.size() == 2 ? std::vector<int64_t>{c[0], (c[1] + 1) % pg[1]} : std::vector<int64_t>{(c[0] + 1) % pg[0]}};
        case ProducerMap::kBroadcast: {
          std::vector<std::vector<int64_t>> row;
          for (int64_t k = 0; k < kBroadcastWidth; ++k) row.push_back({c[0], k});
          return row;
        }
        case ProducerMap::kPermute: return {{pg[0] - 1 - c[0]}};  // fill_mix_inputs reverses
      }
      return {};
    };
    auto awaited = [&](int64_t linear, const std::vector<int64_t>& element) {
      const auto c = unravel(linear, cg);
      for (size_t k = 0; k < shape.size(); ++k) {
        switch (e.cmap) {
          case ConsumerMap::kFirst:
            if (element[k] != 0) return false;
            break;
          case ConsumerMap::kSlice: break;
          case ConsumerMap::kMod:
            if (element[k] != c[std::min(k, c.size() - 1)] % shape[k]) return false;
            break;
          case ConsumerMap::kMatch:
            if (match(s, e, k) == Match::kVar && element[k] != c[k]) return false;
            if (match(s, e, k) == Match::kHalf && element[k] != c[k] / 2) return false;
            break;
        }
      }
      return true;
    };
    for (int64_t ct = 0; ct < cg[0] * (cg.size() == 2 ? cg[1] : 1); ++ct) {
      for (int64_t pt = 0; pt < pg[0] * (pg.size() == 2 ? pg[1] : 1); ++pt) {
        const auto elements = produced(pt);
        if (std::any_of(elements.begin(), elements.end(), [&](const auto& x) { return awaited(ct, x); })) {
          deps[first[e.consumer] + ct].push_back(first[e.producer] + pt);
        }
      }
    }
  }
  for (auto& d : deps) std::sort(d.begin(), d.end());
  return deps;
}

bool runs_mix(const ir::Graph& g) {
  return std::any_of(g.groups.begin(), g.groups.end(), [](const ir::TaskGroup& t) { return t.function == "mix"; });
}

std::vector<std::vector<int64_t>> fill_mix_inputs(const ir::TileGraph& tg, runtime::cpu::BufferStore& store) {
  const ir::Graph& g = tg.graph();
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    if (!g.buffers[b].name.starts_with("perm")) continue;
    auto bytes = store.mutable_bytes(static_cast<int>(b));
    auto* perm = reinterpret_cast<int32_t*>(bytes.data());
    const int64_t n = static_cast<int64_t>(bytes.size() / sizeof(int32_t));
    for (int64_t i = 0; i < n; ++i) perm[i] = static_cast<int32_t>(n - 1 - i);
  }
  // Each element's producers: data-independent out-edges from the tables, the rest resolved now
  // that the permutations are in place.
  std::vector<std::vector<int64_t>> producers(tg.num_elements());
  for (int64_t task = 0; task < tg.num_tasks(); ++task) {
    for (int64_t x : tg.out_elements().row(task)) producers[x].push_back(task);
  }
  const ir::TileGraph::LoadFn load = [&](const std::string& buffer, std::span<const int64_t> index) {
    return store.load_index(buffer, index);
  };
  for (size_t gi = 0; gi < g.groups.size(); ++gi) {
    const ir::GroupInstance& group = tg.groups()[gi];
    EVT_CHECK(group.dd_in_edges.empty() && group.range_trigger_edges.empty())
        << g.groups[gi].name << ": the dependency tables cover in-edges that read no index buffer";
    for (int edge : group.dd_out_edges) {
      for (int64_t task = group.first_task; task < group.first_task + group.num_tasks; ++task) {
        Status s = tg.resolve(task, g.groups[gi].out_edges[edge], load, [&](int64_t x) { producers[x].push_back(task); });
        EVT_CHECK(s.ok()) << s.message();
      }
    }
  }
  std::vector<std::vector<int64_t>> deps(tg.num_tasks());
  for (int64_t task = 0; task < tg.num_tasks(); ++task) {
    for (int64_t x : tg.in_elements().row(task)) deps[task].insert(deps[task].end(), producers[x].begin(), producers[x].end());
    std::sort(deps[task].begin(), deps[task].end());
    deps[task].erase(std::unique(deps[task].begin(), deps[task].end()), deps[task].end());
  }
  for (size_t gi = 0; gi < g.groups.size(); ++gi) {
    if (g.groups[gi].function != "mix") continue;
    const ir::GroupInstance& group = tg.groups()[gi];
    auto bytes = store.mutable_bytes(g.buffer_index(g.groups[gi].reads[0]));
    auto* table = reinterpret_cast<int64_t*>(bytes.data());
    const int64_t width = static_cast<int64_t>(bytes.size() / sizeof(int64_t)) / group.num_tasks;
    std::fill(table, table + width * group.num_tasks, -1);
    for (int64_t l = 0; l < group.num_tasks; ++l) {
      const auto& d = deps[group.first_task + l];
      EVT_CHECK(static_cast<int64_t>(d.size()) < width) << g.groups[gi].name << " task " << l << " has " << d.size()
                                                        << " dependencies, more than its table's row holds";
      table[l * width] = group.first_task + l;
      std::copy(d.begin(), d.end(), table + l * width + 1);
    }
  }
  return deps;
}

}  // namespace evt::testing
