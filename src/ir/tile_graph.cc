#include "ir/tile_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "util/check.h"

namespace evt::ir {

namespace {

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::vector<int64_t> unravel(int64_t linear, const std::vector<int64_t>& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    c[k] = linear % shape[k];
    linear /= shape[k];
  }
  return c;
}

int64_t ravel(const std::vector<int64_t>& c, const std::vector<int64_t>& shape) {
  int64_t l = 0;
  for (size_t k = 0; k < shape.size(); ++k) l = l * shape[k] + c[k];
  return l;
}

// Calls f with every point of the cartesian product of `values` (one list per dimension).
template <typename F>
void for_each_product(const std::vector<std::vector<int64_t>>& values, F&& f) {
  for (const auto& v : values) {
    if (v.empty()) return;
  }
  std::vector<size_t> pos(values.size(), 0);
  std::vector<int64_t> point(values.size());
  while (true) {
    for (size_t k = 0; k < values.size(); ++k) point[k] = values[k][pos[k]];
    f(point);
    size_t k = values.size();
    while (k > 0) {
      --k;
      if (++pos[k] < values[k].size()) break;
      pos[k] = 0;
      if (k == 0) return;
    }
    if (values.empty()) return;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Lookups and names

int TileGraph::group_of_task(int64_t task) const {
  auto it = std::upper_bound(groups_.begin(), groups_.end(), task,
                             [](int64_t t, const GroupInstance& g) { return t < g.first_task; });
  return static_cast<int>(it - groups_.begin()) - 1;
}

std::vector<int64_t> TileGraph::task_coords(int64_t task) const {
  std::vector<int64_t> c;
  task_coords(task, c);
  return c;
}

void TileGraph::task_coords(int64_t task, std::vector<int64_t>& out) const {
  const GroupInstance& g = groups_[group_of_task(task)];
  out.resize(g.extents.size());
  int64_t linear = task - g.first_task;
  for (size_t k = g.extents.size(); k-- > 0;) {
    out[k] = linear % g.extents[k];
    linear /= g.extents[k];
  }
}

int TileGraph::event_of_element(int64_t element) const {
  auto it = std::upper_bound(events_.begin(), events_.end(), element,
                             [](int64_t x, const EventInstance& e) { return x < e.first_element; });
  return static_cast<int>(it - events_.begin()) - 1;
}

std::vector<int64_t> TileGraph::element_coords(int64_t element) const {
  const EventInstance& e = events_[event_of_element(element)];
  return unravel(element - e.first_element, e.shape);
}

std::string TileGraph::task_name(int64_t task) const {
  return graph_->groups[group_of_task(task)].name + coords_str(task_coords(task));
}

std::string TileGraph::element_name(int64_t element) const {
  std::string c = coords_str(element_coords(element));
  return graph_->events[event_of_element(element)].name + "[" + c.substr(1, c.size() - 2) + "]";
}

// ---------------------------------------------------------------------------------------------
// Evaluation

Expected<int64_t> TileGraph::eval(const Expr& e, std::span<const std::string> vars, std::span<const int64_t> values,
                                  const LoadFn* load) const {
  EvalEnv env;
  env.var = [&](const std::string& name) -> std::optional<int64_t> {
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i] == name) return values[i];
    }
    auto it = binding_.find(name);
    if (it == binding_.end()) return std::nullopt;
    return it->second;
  };
  if (load) env.load = *load;
  return evaluate(e, env);
}

Status TileGraph::resolve(int64_t task, const Edge& edge, const LoadFn& load,
                          const std::function<void(int64_t)>& emit) const {
  const int gi = group_of_task(task);
  const TaskGroup& group = graph_->groups[gi];
  const int ei = graph_->event_index(edge.event);
  const EventInstance& ev = events_[ei];
  const std::vector<int64_t> tile = task_coords(task);
  const EdgeMap& map = edge.map;
  EVT_CHECK(map.kind == EdgeMap::Kind::kMap) << "resolve() of a range trigger";
  EVT_CHECK(map.coords.size() == ev.shape.size() && map.vars.size() == tile.size())
      << "edge " << edge.str() << " of " << group.name << " is not rank-checked";

  auto where = [&] { return fmt::format("task group {}, edge {}, tile {}", group.name, edge.str(), coords_str(tile)); };
  std::vector<std::vector<int64_t>> values(map.coords.size());
  bool skip = false;
  for (size_t k = 0; k < map.coords.size(); ++k) {
    const Coord& c = map.coords[k];
    const int64_t dim = ev.shape[k];
    auto add = [&](int64_t v, bool from_data) -> Status {
      if (v < 0 && from_data) return Status();  // "no event"
      if (v < 0 || v >= dim) {
        return error("{}: coordinate {} of event {} is {}, outside [0, {})", where(), k, edge.event, v, dim);
      }
      values[k].push_back(v);
      return Status();
    };
    switch (c.kind) {
      case Coord::Kind::kSlice:
        for (int64_t v = 0; v < dim; ++v) values[k].push_back(v);
        break;
      case Coord::Kind::kScalar: {
        auto v = eval(c.expr, map.vars, tile, &load);
        if (!v.ok()) return v.status().with_context(where());
        EVT_RETURN_IF_ERROR(add(*v, !is_data_independent(c.expr)));
        break;
      }
      case Coord::Kind::kGather: {
        const int bi = graph_->buffer_index(c.buffer);
        EVT_CHECK(bi >= 0) << "unknown buffer " << c.buffer;
        const std::vector<int64_t>& bshape = buffer_shapes_[bi];
        std::vector<std::vector<int64_t>> index_values(c.index.size());
        for (size_t d = 0; d < c.index.size(); ++d) {
          if (!c.index[d].defined()) {
            for (int64_t v = 0; v < bshape[d]; ++v) index_values[d].push_back(v);
          } else {
            auto v = eval(c.index[d], map.vars, tile, &load);
            if (!v.ok()) return v.status().with_context(where());
            index_values[d].push_back(*v);
          }
        }
        Status status;
        for_each_product(index_values, [&](const std::vector<int64_t>& idx) {
          if (!status.ok()) return;
          auto v = load(c.buffer, idx);
          status = v.ok() ? add(*v, true) : v.status().with_context(where());
        });
        EVT_RETURN_IF_ERROR(status);
        break;
      }
    }
    skip = skip || values[k].empty();
  }
  if (skip) return Status();
  for_each_product(values, [&](const std::vector<int64_t>& point) { emit(ev.first_element + ravel(point, ev.shape)); });
  return Status();
}

Expected<std::pair<int64_t, int64_t>> TileGraph::trigger_range(const Edge& edge, int64_t element,
                                                               const LoadFn& load) const {
  EVT_CHECK(edge.map.kind == EdgeMap::Kind::kRangeTrigger) << "trigger_range() of a plain map";
  const std::vector<int64_t> c = element_coords(element);
  auto where = [&] { return fmt::format("range trigger {} at {}", edge.str(), element_name(element)); };
  auto begin = eval(edge.map.range_begin, edge.map.vars, c, &load);
  if (!begin.ok()) return begin.status().with_context(where());
  auto end = eval(edge.map.range_end, edge.map.vars, c, &load);
  if (!end.ok()) return end.status().with_context(where());
  if (*end < *begin) return error("{}: range [{}, {}) is reversed", where(), *begin, *end);
  return std::pair{*begin, *end};
}

// ---------------------------------------------------------------------------------------------
// Construction

Status TileGraph::build_groups_and_events() {
  auto eval_shape = [&](const std::vector<Expr>& shape, const std::string& what) -> Expected<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (const Expr& e : shape) {
      auto v = eval(e, {}, {}, nullptr);
      if (!v.ok()) return v.status().with_context(what);
      if (*v < 0) return error("{}: extent '{}' is {} for {}", what, e.str(), *v, binding_str(binding_));
      out.push_back(*v);
    }
    return out;
  };
  for (const Buffer& b : graph_->buffers) {
    EVT_ASSIGN_OR_RETURN(auto shape, eval_shape(b.shape, "buffer " + b.name));
    buffer_shapes_.push_back(std::move(shape));
  }
  for (const TaskGroup& g : graph_->groups) {
    GroupInstance gi;
    EVT_ASSIGN_OR_RETURN(gi.extents, eval_shape(g.tiles, "task group " + g.name + " tiles"));
    gi.first_task = num_tasks_;
    gi.num_tasks = product(gi.extents);
    num_tasks_ += gi.num_tasks;
    for (size_t i = 0; i < g.in_edges.size(); ++i) {
      gi.keeps_layer.push_back(layer_offset(*graph_, g, g.in_edges[i]) == std::optional<int64_t>(0));
      const EdgeMap& m = g.in_edges[i].map;
      if (m.kind == EdgeMap::Kind::kRangeTrigger) {
        gi.range_trigger_edges.push_back(static_cast<int>(i));
      } else if (!m.is_data_independent()) {
        gi.dd_in_edges.push_back(static_cast<int>(i));
      }
    }
    for (size_t i = 0; i < g.out_edges.size(); ++i) {
      if (!g.out_edges[i].map.is_data_independent()) gi.dd_out_edges.push_back(static_cast<int>(i));
    }
    groups_.push_back(std::move(gi));
  }
  for (const Event& e : graph_->events) {
    EventInstance ei;
    EVT_ASSIGN_OR_RETURN(ei.shape, eval_shape(e.shape, "event " + e.name));
    ei.first_element = num_elements_;
    ei.num_elements = product(ei.shape);
    ei.runtime_count = e.wait.kind == WaitCount::Kind::kRuntime;
    num_elements_ += ei.num_elements;
    events_.push_back(std::move(ei));
  }
  for (size_t gi = 0; gi < graph_->groups.size(); ++gi) {
    const TaskGroup& g = graph_->groups[gi];
    for (const std::string& s : g.sets) {
      const int ei = graph_->event_index(s);
      if (ei < 0) return error("task group {}: sets unknown event '{}'", g.name, s);
      events_[ei].setter_group = static_cast<int>(gi);
    }
    for (const Edge& e : g.out_edges) {
      const int ei = graph_->event_index(e.event);
      if (ei < 0) return error("task group {}: out-edge names unknown event '{}'", g.name, e.event);
      if (!e.map.is_data_independent()) events_[ei].has_dd_producer = true;
    }
  }
  return Status();
}

Status TileGraph::build_edges() {
  std::vector<int64_t> scratch;
  const LoadFn no_load;  // data-independent maps read no buffer
  auto append_row = [&](Csr& csr) {
    csr.values.insert(csr.values.end(), scratch.begin(), scratch.end());
    csr.offsets.push_back(static_cast<int64_t>(csr.values.size()));
  };
  auto check_edge = [&](const TaskGroup& g, const Edge& e) -> Status {
    const int ei = graph_->event_index(e.event);
    if (ei < 0) return error("task group {}: edge {} names unknown event '{}'", g.name, e.str(), e.event);
    if (e.map.kind == EdgeMap::Kind::kMap &&
        (e.map.vars.size() != g.tiles.size() || e.map.coords.size() != events_[ei].shape.size())) {
      return error("task group {}: edge {} maps {} tile coordinates to {} event coordinates, but the grid has rank {} "
                   "and event {} has rank {}",
                   g.name, e.str(), e.map.vars.size(), e.map.coords.size(), g.tiles.size(), e.event,
                   events_[ei].shape.size());
    }
    if (e.map.kind == EdgeMap::Kind::kRangeTrigger && e.map.vars.size() != events_[ei].shape.size()) {
      return error("task group {}: range trigger {} has {} event variables but event {} has rank {}", g.name,
                   e.str(), e.map.vars.size(), e.event, events_[ei].shape.size());
    }
    return Status();
  };

  release_counts_.assign(num_tasks_, 0);
  for (size_t gi = 0; gi < graph_->groups.size(); ++gi) {
    const TaskGroup& g = graph_->groups[gi];
    for (const Edge& e : g.in_edges) EVT_RETURN_IF_ERROR(check_edge(g, e));
    for (const Edge& e : g.out_edges) EVT_RETURN_IF_ERROR(check_edge(g, e));
    const GroupInstance& inst = groups_[gi];
    for (int64_t t = inst.first_task; t < inst.first_task + inst.num_tasks; ++t) {
      auto collect = [&](const std::vector<Edge>& edges) -> Status {
        scratch.clear();
        for (const Edge& e : edges) {
          if (e.map.kind != EdgeMap::Kind::kMap || !e.map.is_data_independent()) continue;
          EVT_RETURN_IF_ERROR(resolve(t, e, no_load, [&](int64_t x) { scratch.push_back(x); }));
        }
        return Status();
      };
      EVT_RETURN_IF_ERROR(collect(g.in_edges));
      release_counts_[t] = static_cast<int32_t>(scratch.size() + inst.range_trigger_edges.size());
      append_row(in_elements_);
      EVT_RETURN_IF_ERROR(collect(g.out_edges));
      append_row(out_elements_);
    }
  }

  // Invert in_elements into consumers.
  consumers_.offsets.assign(num_elements_ + 1, 0);
  for (int64_t x : in_elements_.values) ++consumers_.offsets[x + 1];
  for (int64_t x = 0; x < num_elements_; ++x) consumers_.offsets[x + 1] += consumers_.offsets[x];
  consumers_.values.resize(in_elements_.values.size());
  std::vector<int64_t> fill(consumers_.offsets.begin(), consumers_.offsets.end() - 1);
  for (int64_t t = 0; t < num_tasks_; ++t) {
    for (int64_t x : in_elements_.row(t)) consumers_.values[fill[x]++] = t;
  }
  return Status();
}

Status TileGraph::compute_counts() {
  static_notifications_.assign(num_elements_, 0);
  for (int64_t x : out_elements_.values) ++static_notifications_[x];
  initial_counts_.assign(num_elements_, 0);
  for (size_t ei = 0; ei < events_.size(); ++ei) {
    const Event& e = graph_->events[ei];
    const EventInstance& inst = events_[ei];
    auto fill = [&](int64_t v) {
      std::fill_n(initial_counts_.begin() + inst.first_element, inst.num_elements, v);
    };
    if (e.wait.kind == WaitCount::Kind::kRuntime) {
      fill(kWaitCountUnset);
    } else if (e.wait.count.defined()) {
      auto v = eval(e.wait.count, {}, {}, nullptr);
      if (!v.ok()) return v.status().with_context("event " + e.name + " wait_count");
      if (*v < 0) return error("event {}: wait_count '{}' is {} for {}", e.name, e.wait.count.str(), *v, binding_str(binding_));
      fill(*v);
    } else if (inst.has_dd_producer) {
      return error("event {}: its wait count cannot be inferred, because an out-edge into it is data-dependent; "
                   "declare wait_count=EXPR or wait_count=runtime", e.name);
    } else {
      // Inferred per element: exactly the notifications each element receives.
      std::copy_n(static_notifications_.begin() + inst.first_element, inst.num_elements,
                  initial_counts_.begin() + inst.first_element);
    }
  }
  return Status();
}

void TileGraph::compute_group_predecessors() {
  // Group-level predecessors induced by data-dependent edges: every producer group of such an
  // event precedes every consumer group of it, layer by layer when both are layered and every
  // edge between them on the event stays within a layer.
  const size_t num_groups = graph_->groups.size();
  group_preds_.assign(num_groups, {});
  group_succs_.assign(num_groups, {});
  for (size_t ei = 0; ei < events_.size(); ++ei) {
    const std::string& name = graph_->events[ei].name;
    bool dd = events_[ei].has_dd_producer;
    std::vector<int> producers, consumers;
    // Whether all of a group's edges on the event keep the layer (offset 0).
    const auto within_layer = [&](const TaskGroup& g, const std::vector<Edge>& edges) {
      return std::all_of(edges.begin(), edges.end(), [&](const Edge& e) {
        return e.event != name || layer_offset(*graph_, g, e) == std::optional<int64_t>(0);
      });
    };
    for (size_t gi = 0; gi < num_groups; ++gi) {
      const TaskGroup& g = graph_->groups[gi];
      for (const Edge& e : g.out_edges) {
        if (e.event == name) producers.push_back(static_cast<int>(gi));
      }
      for (const Edge& e : g.in_edges) {
        if (e.event != name) continue;
        consumers.push_back(static_cast<int>(gi));
        dd = dd || e.map.kind == EdgeMap::Kind::kRangeTrigger || !e.map.is_data_independent();
      }
    }
    if (!dd) continue;
    for (int c : consumers) {
      for (int p : producers) {
        const bool same_layer = within_layer(graph_->groups[p], graph_->groups[p].out_edges) &&
                                within_layer(graph_->groups[c], graph_->groups[c].in_edges);
        auto& preds = group_preds_[c];
        auto it = std::find_if(preds.begin(), preds.end(), [&](const GroupPred& x) { return x.group == p; });
        if (it == preds.end()) {
          preds.push_back({p, same_layer});
        } else {
          it->same_layer = it->same_layer && same_layer;
        }
      }
    }
  }
  barrier_first_.assign(num_groups + 1, num_tasks_ + num_elements_);
  for (size_t c = 0; c < num_groups; ++c) {
    for (const GroupPred& p : group_preds_[c]) group_succs_[p.group].push_back({static_cast<int>(c), p.same_layer});
    const int64_t layers = graph_->groups[c].layered && !groups_[c].extents.empty() ? groups_[c].extents[0] : 0;
    barrier_first_[c + 1] = barrier_first_[c] + 1 + layers;
  }
}

int64_t TileGraph::layer_of_task(int group, int64_t task) const {
  const GroupInstance& gi = groups_[group];
  return (task - gi.first_task) / (gi.num_tasks / gi.extents[0]);
}

template <class F>
void TileGraph::for_each_successor(int64_t n, F&& f) const {
  const int64_t barrier0 = num_tasks_ + num_elements_;
  if (n < num_tasks_) {
    for (int64_t x : out_elements_.row(n)) f(num_tasks_ + x);
    const int g = group_of_task(n);
    bool whole = false, by_layer = false;
    for (const GroupPred& s : group_succs_[g]) (s.same_layer ? by_layer : whole) = true;
    if (whole) f(barrier_first_[g]);
    if (by_layer) f(barrier_first_[g] + 1 + layer_of_task(g, n));
  } else if (n < barrier0) {
    for (int64_t t : consumers_.row(n - num_tasks_)) f(t);
  } else {
    const int g = static_cast<int>(std::upper_bound(barrier_first_.begin(), barrier_first_.end(), n) -
                                   barrier_first_.begin()) - 1;
    const int64_t layer = n - barrier_first_[g] - 1;  // -1: the whole group
    for (const GroupPred& s : group_succs_[g]) {
      if (s.same_layer != (layer >= 0)) continue;
      const GroupInstance& gi = groups_[s.group];
      int64_t begin = gi.first_task, end = gi.first_task + gi.num_tasks;
      if (layer >= 0) {
        const int64_t per_layer = gi.num_tasks / gi.extents[0];
        begin = layer < gi.extents[0] ? gi.first_task + layer * per_layer : end;
        end = std::min(end, begin + per_layer);
      }
      for (int64_t t = begin; t < end; ++t) f(t);
    }
  }
}

std::string TileGraph::node_name(int64_t n) const {
  if (n < num_tasks_) return "task " + task_name(n);
  if (n < num_tasks_ + num_elements_) return "event " + element_name(n - num_tasks_);
  const int g = static_cast<int>(std::upper_bound(barrier_first_.begin(), barrier_first_.end(), n) -
                                 barrier_first_.begin()) - 1;
  const int64_t layer = n - barrier_first_[g] - 1;
  return layer < 0 ? fmt::format("all tasks of group {} (data-dependent edge)", graph_->groups[g].name)
                   : fmt::format("the tasks of group {} in layer {} (data-dependent edge)", graph_->groups[g].name,
                                 layer);
}

Expected<std::vector<int64_t>> TileGraph::topological_order(const std::function<uint64_t(int64_t)>& key) const {
  // Kahn's algorithm over tasks, elements and the barrier nodes of data-dependent edges.
  const int64_t num_nodes = barrier_first_.back();
  std::vector<int32_t> indegree(num_nodes, 0);
  for (int64_t n = 0; n < num_nodes; ++n) for_each_successor(n, [&](int64_t s) { ++indegree[s]; });

  using Item = std::pair<uint64_t, int64_t>;  // (key, task)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready_tasks;
  std::vector<int64_t> ready_other;
  auto make_ready = [&](int64_t n) {
    if (n < num_tasks_) {
      ready_tasks.emplace(key(n), n);
    } else {
      ready_other.push_back(n);
    }
  };
  for (int64_t n = 0; n < num_nodes; ++n) {
    if (indegree[n] == 0) make_ready(n);
  }
  std::vector<int64_t> order;
  order.reserve(num_tasks_);
  auto release = [&](int64_t n) {
    for_each_successor(n, [&](int64_t s) {
      if (--indegree[s] == 0) make_ready(s);
    });
  };
  while (!ready_tasks.empty() || !ready_other.empty()) {
    if (!ready_other.empty()) {  // elements and barriers cost nothing: release them first
      int64_t n = ready_other.back();
      ready_other.pop_back();
      release(n);
      continue;
    }
    int64_t t = ready_tasks.top().second;
    ready_tasks.pop();
    order.push_back(t);
    release(t);
  }
  if (static_cast<int64_t>(order.size()) != num_tasks_) return Status::error(cycle_report(indegree));
  return order;
}

std::string TileGraph::cycle_report(const std::vector<int32_t>& indegree) const {
  // Nodes left with a positive in-degree contain a cycle; find one by depth-first search.
  const int64_t num_nodes = static_cast<int64_t>(indegree.size());
  auto succs = [&](int64_t n) {
    std::vector<int64_t> out;
    for_each_successor(n, [&](int64_t s) {
      if (indegree[s] > 0) out.push_back(s);
    });
    return out;
  };
  std::vector<uint8_t> color(num_nodes, 0);  // 0 new, 1 on stack, 2 done
  std::vector<int64_t> stack;
  for (int64_t start = 0; start < num_nodes; ++start) {
    if (indegree[start] <= 0 || color[start]) continue;
    std::vector<std::pair<int64_t, std::vector<int64_t>>> frames;
    frames.emplace_back(start, succs(start));
    color[start] = 1;
    stack.assign(1, start);
    while (!frames.empty()) {
      auto& [node, next] = frames.back();
      if (next.empty()) {
        color[node] = 2;
        frames.pop_back();
        stack.pop_back();
        continue;
      }
      int64_t s = next.back();
      next.pop_back();
      if (color[s] == 1) {
        auto from = std::find(stack.begin(), stack.end(), s);
        std::string msg = fmt::format("the tile graph has a cycle for {}:", binding_str(binding_));
        constexpr int kMaxSteps = 12;
        int steps = 0;
        for (auto it = from; it != stack.end() && steps < kMaxSteps; ++it, ++steps) msg += "\n  " + node_name(*it) + " ->";
        if (stack.end() - from > kMaxSteps) msg += fmt::format("\n  ... ({} more) ->", (stack.end() - from) - kMaxSteps);
        msg += "\n  " + node_name(s);
        return msg;
      }
      if (color[s] == 0) {
        color[s] = 1;
        stack.push_back(s);
        frames.emplace_back(s, succs(s));
      }
    }
  }
  return "the tile graph has a cycle";
}

Expected<TileGraph> instantiate(const Graph& graph, const Binding& binding) {
  for (const std::string& d : graph.dims) {
    if (!binding.count(d)) return error("no value for dimension '{}' (bind it, e.g. --bind {}=4)", d, d);
  }
  TileGraph tg;
  tg.graph_ = &graph;
  tg.binding_ = binding;
  EVT_RETURN_IF_ERROR(tg.build_groups_and_events());
  EVT_RETURN_IF_ERROR(tg.build_edges());
  EVT_RETURN_IF_ERROR(tg.compute_counts());
  tg.compute_group_predecessors();
  EVT_ASSIGN_OR_RETURN(tg.topo_order_, tg.topological_order([](int64_t task) { return static_cast<uint64_t>(task); }));
  return tg;
}

}  // namespace evt::ir
