#include "compiler/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "compiler/infer_wait_counts.h"
#include "ir/tile_graph.h"

namespace evt::compiler {

namespace {

class Verifier {
 public:
  Verifier(const ir::Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  Status run() {
    check_names();
    check_declarations();
    for (const ir::TaskGroup& group : g_.groups) check_group(group);
    check_events();
    if (!errors_.empty()) return result();  // the ordering checks assume a well-formed graph
    check_ordering();
    check_counts_symbolically();
    for (const ir::Binding& b : bindings()) check_binding(b);
    return result();
  }

 private:
  template <typename... Args>
  void fail(fmt::format_string<Args...> format, Args&&... args) {
    errors_.push_back(fmt::format(format, std::forward<Args>(args)...));
  }

  Status result() const {
    if (errors_.empty()) return Status();
    constexpr size_t kMaxShown = 20;
    std::string msg = fmt::format("{} error{}:", errors_.size(), errors_.size() == 1 ? "" : "s");
    for (size_t i = 0; i < errors_.size() && i < kMaxShown; ++i) msg += "\n  " + errors_[i];
    if (errors_.size() > kMaxShown) msg += fmt::format("\n  ... and {} more", errors_.size() - kMaxShown);
    return Status::error(msg);
  }

  // --- names and expressions

  void check_names() {
    std::set<std::string> seen;
    auto add = [&](const std::string& kind, const std::string& n) {
      if (!seen.insert(n).second) fail("{} '{}': the name is declared more than once", kind, n);
    };
    for (const auto& d : g_.dims) add("dim", d);
    for (const auto& b : g_.buffers) add("buffer", b.name);
    for (const auto& e : g_.events) add("event", e.name);
    for (const auto& t : g_.groups) add("task group", t.name);
  }

  // An expression of the dims alone: shapes, grids, wait counts.
  void check_dim_expr(const ir::Expr& e, const std::string& where) {
    if (!ir::is_data_independent(e)) fail("{}: '{}' reads a buffer; only dims may appear here", where, e.str());
    std::set<std::string> vars;
    ir::collect_vars(e, vars);
    for (const auto& v : vars) {
      if (!g_.has_dim(v)) fail("{}: '{}' uses '{}', which is not a declared dim", where, e.str(), v);
    }
  }

  void check_declarations() {
    for (const auto& b : g_.buffers) {
      for (const auto& e : b.shape) check_dim_expr(e, "buffer " + b.name);
    }
    for (const auto& ev : g_.events) {
      for (const auto& e : ev.shape) check_dim_expr(e, "event " + ev.name);
      if (ev.wait.count.defined()) check_dim_expr(ev.wait.count, "event " + ev.name + " wait_count");
    }
  }

  // An expression inside an edge map: map variables, dims, and loads from integer buffers.
  void check_map_expr(const ir::Expr& e, const std::vector<std::string>& vars, const std::string& where) {
    std::set<std::string> used;
    ir::collect_vars(e, used);
    for (const auto& v : used) {
      if (!g_.has_dim(v) && std::find(vars.begin(), vars.end(), v) == vars.end()) {
        fail("{}: '{}' is neither a variable of the map nor a declared dim", where, v);
      }
    }
    std::set<std::string> loads;
    ir::collect_loads(e, loads);
    for (const auto& name : loads) check_index_buffer(name, where);
    check_load_ranks(e, where);
  }

  void check_load_ranks(const ir::Expr& e, const std::string& where) {
    if (e.op() == ir::Op::kLoad) {
      const ir::Buffer* b = g_.find_buffer(e.name());
      if (b && b->shape.size() != e.args().size()) {
        fail("{}: '{}' indexes buffer {} of rank {} with {} subscripts", where, e.str(), b->name, b->shape.size(),
             e.args().size());
      }
    }
    for (const auto& a : e.args()) check_load_ranks(a, where);
  }

  void check_index_buffer(const std::string& name, const std::string& where) {
    const ir::Buffer* b = g_.find_buffer(name);
    if (!b) {
      fail("{}: reads unknown index buffer '{}'", where, name);
    } else if (b->dtype != ir::DType::kI32 && b->dtype != ir::DType::kI64) {
      fail("{}: index buffer {} has dtype {}; index buffers must be i32 or i64", where, name, ir::dtype_name(b->dtype));
    }
  }

  // --- task groups

  void check_group(const ir::TaskGroup& group) {
    const std::string where = "task group " + group.name;
    for (const auto& e : group.tiles) check_dim_expr(e, where + " tiles");
    if (ctx_.registry) {
      const kernels::TileFunction* fn = ctx_.registry->find(group.function);
      if (!fn) {
        fail("{}: unknown tile function '{}'", where, group.function);
      } else if (static_cast<int>(group.reads.size()) != fn->num_reads ||
                 static_cast<int>(group.writes.size()) != fn->num_writes) {
        fail("{}: tile function {} takes {} reads and {} writes, but the group passes {} and {}", where, fn->name,
             fn->num_reads, fn->num_writes, group.reads.size(), group.writes.size());
      } else if (fn->stream_after == kernels::StreamAfter::kGuards && !fn->device_stream.empty()) {
        check_stream_guards(group, *fn, where);
      }
    }
    for (const auto* list : {&group.reads, &group.writes}) {
      for (const auto& b : *list) {
        if (!g_.find_buffer(b)) fail("{}: unknown buffer '{}'", where, b);
      }
    }
    for (const auto& s : group.sets) {
      const ir::Event* ev = g_.find_event(s);
      if (!ev) {
        fail("{}: sets unknown event '{}'", where, s);
      } else if (ev->wait.kind != ir::WaitCount::Kind::kRuntime) {
        fail("{}: sets the wait count of event {}, which is not declared wait_count=runtime", where, s);
      }
    }
    for (const auto& e : group.in_edges) check_edge(group, e, true);
    for (const auto& e : group.out_edges) check_edge(group, e, false);
    if (group.schedule == ir::GroupSchedule::kInline) check_inline(group, where);
  }

  // A StreamAfter::kGuards stream reads buffers the loader waits for through the group's
  // data-independent in-edges and single-element triggers: a group with none of them would have
  // the loader read the tables before any task wrote them.
  void check_stream_guards(const ir::TaskGroup& group, const kernels::TileFunction& fn, const std::string& where) {
    const bool guarded = std::any_of(group.in_edges.begin(), group.in_edges.end(),
                                     [&](const ir::Edge& e) { return ir::waited_by_tile(g_, group, e); });
    if (!guarded) {
      fail("{}: tile function {}'s weight stream reads what the group's waits guard (StreamAfter::kGuards), but the "
           "group has no data-independent in-edge or single-element trigger for the loader to wait for",
           where, fn.name);
    }
  }

  // An inline group runs where its one awaited element completes, which its notifier finds from
  // the element (the in-edge's inverse): one plain in-edge, and no weight stream for a loader
  // that cannot know when it runs.
  void check_inline(const ir::TaskGroup& group, const std::string& where) {
    const auto one_element = [](const ir::EdgeMap& m) {
      return std::none_of(m.coords.begin(), m.coords.end(),
                          [](const ir::Coord& c) { return c.kind == ir::Coord::Kind::kSlice; });
    };
    if (group.in_edges.size() != 1 || group.in_edges[0].map.kind != ir::EdgeMap::Kind::kMap ||
        !group.in_edges[0].map.is_data_independent() || !one_element(group.in_edges[0].map)) {
      fail("{}: schedule=inline needs exactly one in-edge, one element per task, and a map that reads no index "
           "buffer",
           where);
    }
    if (ctx_.registry) {
      const kernels::TileFunction* fn = ctx_.registry->find(group.function);
      if (fn && !fn->device_stream.empty()) {
        fail("{}: schedule=inline, but tile function {} reads a weight stream, which the loader could not "
             "fetch ahead of a task it does not know is next",
             where, fn->name);
      }
    }
  }

  void check_edge(const ir::TaskGroup& group, const ir::Edge& edge, bool in_edge) {
    const std::string where = fmt::format("task group {}, {} {}", group.name, in_edge ? "in-edge" : "out-edge", edge.str());
    const ir::Event* ev = g_.find_event(edge.event);
    if (!ev) return fail("{}: unknown event '{}'", where, edge.event);
    const ir::EdgeMap& m = edge.map;
    if (m.kind == ir::EdgeMap::Kind::kRangeTrigger) {
      if (!in_edge) return fail("{}: a range trigger releases consumers, so it can only be an in-edge", where);
      if (m.vars.size() != ev->shape.size()) {
        fail("{}: the trigger names {} event coordinates but event {} has rank {}", where, m.vars.size(), ev->name,
             ev->shape.size());
      }
      check_map_expr(m.range_begin, m.vars, where);
      check_map_expr(m.range_end, m.vars, where);
      return;
    }
    if (m.vars.size() != group.tiles.size()) {
      fail("{}: the map has {} tile variables but the grid has rank {}", where, m.vars.size(), group.tiles.size());
    }
    if (m.coords.size() != ev->shape.size()) {
      fail("{}: the map gives {} event coordinates but event {} has rank {}", where, m.coords.size(), ev->name,
           ev->shape.size());
    }
    for (const ir::Coord& c : m.coords) {
      if (c.kind == ir::Coord::Kind::kScalar) check_map_expr(c.expr, m.vars, where);
      if (c.kind != ir::Coord::Kind::kGather) continue;
      check_index_buffer(c.buffer, where);
      const ir::Buffer* b = g_.find_buffer(c.buffer);
      if (b && b->shape.size() != c.index.size()) {
        fail("{}: indexes buffer {} of rank {} with {} subscripts", where, b->name, b->shape.size(), c.index.size());
      }
      for (const auto& i : c.index) {
        if (i.defined()) check_map_expr(i, m.vars, where);
      }
    }
    if (in_edge && !m.is_data_independent() && ctx_.dynamic_scheduling) {
      fail("{}: a data-dependent in-edge needs its inverse for dynamic scheduling, which must know which tasks an "
           "event releases; write it as a range trigger \"e->[begin, end)\" (or verify for static scheduling only)",
           where);
    }
  }

  // --- events

  void check_events() {
    for (const ir::Event& ev : g_.events) {
      std::vector<std::string> setters, producers, waiters;
      for (const ir::TaskGroup& group : g_.groups) {
        if (std::find(group.sets.begin(), group.sets.end(), ev.name) != group.sets.end()) setters.push_back(group.name);
        for (const auto& e : group.out_edges) {
          if (e.event == ev.name) producers.push_back(group.name);
        }
        for (const auto& e : group.in_edges) {
          if (e.event == ev.name) waiters.push_back(fmt::format("task group {}, in-edge {}", group.name, e.str()));
        }
      }
      if (ev.wait.kind == ir::WaitCount::Kind::kRuntime && setters.size() != 1) {
        fail("event {}: wait_count=runtime needs exactly one task group that sets it (sets=({},)), found {}", ev.name,
             ev.name, setters.size());
      }
      if (producers.empty()) {
        for (const auto& w : waiters) fail("{}: waits on event {}, but no task group notifies it", w, ev.name);
      }
    }
  }

  // --- group-level ordering

  // Groups that are complete, transitively, before any task of `group` passes the given in-edges
  // (and, with `waited`, that edge too).
  std::set<int> ancestors(int group, bool data_independent_in_edges_only, const ir::Edge* waited = nullptr) const {
    std::set<int> seen;
    std::vector<int> stack;
    auto push_producers_of = [&](const std::string& event) {
      for (size_t p = 0; p < g_.groups.size(); ++p) {
        for (const auto& e : g_.groups[p].out_edges) {
          if (e.event == event && seen.insert(static_cast<int>(p)).second) stack.push_back(static_cast<int>(p));
        }
      }
    };
    for (const auto& e : g_.groups[group].in_edges) {
      if (!data_independent_in_edges_only || (e.map.kind == ir::EdgeMap::Kind::kMap && e.map.is_data_independent())) {
        push_producers_of(e.event);
      }
    }
    if (waited != nullptr) push_producers_of(waited->event);
    while (!stack.empty()) {
      const int g = stack.back();
      stack.pop_back();
      for (const auto& e : g_.groups[g].in_edges) push_producers_of(e.event);
    }
    return seen;
  }

  std::vector<int> writers_of(const std::string& buffer) const {
    std::vector<int> out;
    for (size_t g = 0; g < g_.groups.size(); ++g) {
      const auto& w = g_.groups[g].writes;
      if (std::find(w.begin(), w.end(), buffer) != w.end()) out.push_back(static_cast<int>(g));
    }
    return out;
  }

  void check_ordering() {
    for (size_t gi = 0; gi < g_.groups.size(); ++gi) {
      const ir::TaskGroup& group = g_.groups[gi];
      const int self = static_cast<int>(gi);
      // A data-dependent in-edge is resolved after the data-independent ones were waited on,
      // so those must already cover every writer of its index buffers; a single-element trigger
      // is resolved after its own element was waited on too.
      for (const auto& e : group.in_edges) {
        if (e.map.is_data_independent()) continue;
        const std::set<int> ready = ancestors(self, true, ir::single_element_trigger(g_, group, e) ? &e : nullptr);
        for (const auto& buffer : e.map.index_buffers()) {
          for (int w : writers_of(buffer)) {
            if (!ready.count(w)) {
              fail("task group {}, in-edge {}: index buffer {} is written by task group {}, which the group's "
                   "data-independent in-edges do not wait for",
                   group.name, e.str(), buffer, g_.groups[w].name);
            }
          }
        }
      }
      // A data-dependent out-edge is resolved after the task ran: its index buffers must come
      // from the group itself or from groups before it.
      for (const auto& e : group.out_edges) {
        if (e.map.is_data_independent()) continue;
        const std::set<int> before = ancestors(self, false);
        for (const auto& buffer : e.map.index_buffers()) {
          for (int w : writers_of(buffer)) {
            if (w != self && !before.count(w)) {
              fail("task group {}, out-edge {}: index buffer {} is written by task group {}, which does not run "
                   "before it",
                   group.name, e.str(), buffer, g_.groups[w].name);
            }
          }
        }
      }
    }
    // A run-time wait count must be set before the first notification can arrive.
    for (size_t gi = 0; gi < g_.groups.size(); ++gi) {
      for (const auto& s : g_.groups[gi].sets) {
        for (size_t p = 0; p < g_.groups.size(); ++p) {
          for (const auto& e : g_.groups[p].out_edges) {
            if (e.event != s || ancestors(static_cast<int>(p), false).count(static_cast<int>(gi))) continue;
            fail("event {}: its run-time wait count is set by task group {}, but task group {} notifies it through "
                 "out-edge {} without waiting for {} first",
                 s, g_.groups[gi].name, g_.groups[p].name, e.str(), g_.groups[gi].name);
          }
        }
      }
    }
  }

  // --- counts

  void check_counts_symbolically() {
    for (const ir::Event& ev : g_.events) {
      if (ev.wait.kind == ir::WaitCount::Kind::kRuntime) {
        ctx_.notes.push_back(fmt::format("{}: run-time wait count; checked during execution", ev.name));
        continue;
      }
      if (!ev.wait.count.defined()) continue;  // counted per element at instantiation
      auto proved = proved_notification_count(g_, ev);
      if (proved && ir::provably_equal(*proved, ev.wait.count)) {
        ctx_.notes.push_back(fmt::format("{}: wait_count={} proved for every binding", ev.name, ev.wait.count.str()));
      } else if (proved) {
        ctx_.notes.push_back(fmt::format("{}: wait_count={} differs symbolically from the {} notifications each "
                                         "element receives; checked for the bindings below",
                                         ev.name, ev.wait.count.str(), proved->str()));
      } else if (has_dd_producer(ev)) {
        ctx_.notes.push_back(fmt::format("{}: wait_count={} depends on index data; checked during execution",
                                         ev.name, ev.wait.count.str()));
      } else {
        ctx_.notes.push_back(fmt::format("{}: wait_count={} not provable symbolically; checked for the bindings below",
                                         ev.name, ev.wait.count.str()));
      }
    }
  }

  bool has_dd_producer(const ir::Event& ev) const {
    for (const auto& group : g_.groups) {
      for (const auto& e : group.out_edges) {
        if (e.event == ev.name && !e.map.is_data_independent()) return true;
      }
    }
    return false;
  }

  std::vector<ir::Binding> bindings() {
    if (!ctx_.bindings.empty()) return ctx_.bindings;
    std::vector<ir::Binding> out;
    for (int64_t v : kSampleDimValues) {
      ir::Binding b;
      for (const auto& d : g_.dims) b[d] = v;
      out.push_back(b);
      if (g_.dims.empty()) break;
    }
    return out;
  }

  void check_binding(const ir::Binding& binding) {
    auto tg = ir::instantiate(g_, binding);
    if (!tg.ok()) return fail("for {}: {}", ir::binding_str(binding), tg.status().message());
    ctx_.notes.push_back(fmt::format("checked {}: {} tasks, {} event elements", ir::binding_str(binding),
                                     tg->num_tasks(), tg->num_elements()));
    for (size_t ei = 0; ei < g_.events.size(); ++ei) {
      const ir::EventInstance& inst = tg->events()[ei];
      if (inst.runtime_count || inst.has_dd_producer) continue;  // checked during execution
      int64_t bad = 0, first = -1;
      for (int64_t x = inst.first_element; x < inst.first_element + inst.num_elements; ++x) {
        if (tg->initial_counts()[x] == tg->static_notifications()[x]) continue;
        if (bad++ == 0) first = x;
      }
      if (bad == 0) continue;
      fail("event {}: {} has wait_count={} but receives {} notification{}{} (for {}{})", g_.events[ei].name,
           tg->element_name(first), tg->initial_counts()[first], tg->static_notifications()[first],
           tg->static_notifications()[first] == 1 ? "" : "s", producers_str(*tg, first), ir::binding_str(binding),
           bad > 1 ? fmt::format("; {} elements differ", bad) : "");
    }
  }

  static std::string producers_str(const ir::TileGraph& tg, int64_t element) {
    std::vector<std::string> names;
    for (int64_t t = 0; t < tg.num_tasks(); ++t) {
      for (int64_t x : tg.out_elements().row(t)) {
        if (x != element) continue;
        const ir::TaskGroup& group = tg.graph().groups[tg.group_of_task(t)];
        std::string edge;
        for (const auto& e : group.out_edges) {
          if (e.event == tg.graph().events[tg.event_of_element(element)].name) edge = e.str();
        }
        names.push_back(fmt::format("{} through out-edge {}", tg.task_name(t), edge));
      }
    }
    if (names.empty()) return "";
    std::string s = ": from ";
    for (size_t i = 0; i < names.size() && i < 4; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > 4) s += fmt::format(" and {} more", names.size() - 4);
    return s;
  }

  const ir::Graph& g_;
  PassContext& ctx_;
  std::vector<std::string> errors_;
};

}  // namespace

Status verify(ir::Graph& g, PassContext& ctx) { return Verifier(g, ctx).run(); }

}  // namespace evt::compiler
