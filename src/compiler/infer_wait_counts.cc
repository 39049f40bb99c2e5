#include "compiler/infer_wait_counts.h"

#include <fmt/format.h>

namespace evt::compiler {

namespace {

// Notifications per element from one out-edge, when the map covers the event uniformly.
std::optional<ir::Expr> edge_count(const ir::TaskGroup& group, const ir::EdgeMap& map, const ir::Event& event) {
  if (map.kind != ir::EdgeMap::Kind::kMap || map.coords.size() != event.shape.size() ||
      map.vars.size() != group.tiles.size()) {
    return std::nullopt;
  }
  std::vector<bool> used(map.vars.size(), false);
  auto var_index = [&](const ir::Expr& e) -> int {
    if (!e.is_var()) return -1;
    for (size_t j = 0; j < map.vars.size(); ++j) {
      if (map.vars[j] == e.name() && !used[j]) return static_cast<int>(j);
    }
    return -1;
  };
  ir::Expr count = 1;
  for (size_t k = 0; k < map.coords.size(); ++k) {
    const ir::Coord& c = map.coords[k];
    const ir::Expr& extent = event.shape[k];
    if (c.kind == ir::Coord::Kind::kSlice) continue;
    if (c.kind != ir::Coord::Kind::kScalar) return std::nullopt;
    const ir::Expr e = ir::simplify(c.expr);
    if (e.is_const()) {
      if (e.value() != 0 || !ir::provably_equal(extent, 1)) return std::nullopt;
      continue;
    }
    if (int j = var_index(e); j >= 0) {
      if (!ir::provably_equal(group.tiles[j], extent)) return std::nullopt;
      used[j] = true;
      continue;
    }
    if (e.op() == ir::Op::kFloorDiv && e.args()[1].is_const() && e.args()[1].value() > 0) {
      const int j = var_index(e.args()[0]);
      if (j < 0 || !ir::provably_equal(group.tiles[j], extent * e.args()[1])) return std::nullopt;
      used[j] = true;
      count = count * e.args()[1];
      continue;
    }
    return std::nullopt;
  }
  for (size_t j = 0; j < used.size(); ++j) {
    if (!used[j]) count = count * group.tiles[j];
  }
  return count;
}

}  // namespace

std::optional<ir::Expr> proved_notification_count(const ir::Graph& g, const ir::Event& event) {
  ir::Expr total = 0;
  for (const ir::TaskGroup& group : g.groups) {
    for (const ir::Edge& edge : group.out_edges) {
      if (edge.event != event.name) continue;
      auto c = edge_count(group, edge.map, event);
      if (!c) return std::nullopt;
      total = total + *c;
    }
  }
  return ir::simplify(total);
}

Status infer_wait_counts(ir::Graph& g, PassContext& ctx) {
  for (ir::Event& event : g.events) {
    if (event.wait.kind != ir::WaitCount::Kind::kInferred || event.wait.count.defined()) continue;
    for (const ir::TaskGroup& group : g.groups) {
      for (const ir::Edge& edge : group.out_edges) {
        if (edge.event == event.name && !edge.map.is_data_independent()) {
          return error("event {}: its wait count cannot be inferred, because out-edge {} of task group "
                       "{} is data-dependent; declare wait_count=EXPR or wait_count=runtime",
                       event.name, edge.str(), group.name);
        }
      }
    }
    if (auto count = proved_notification_count(g, event)) {
      event.wait.count = *count;
      ctx.notes.push_back(fmt::format("{}: wait count inferred as {}", event.name, count->str()));
    } else {
      ctx.notes.push_back(fmt::format("{}: wait count has no closed form; counted per element for each binding",
                                      event.name));
    }
  }
  return Status();
}

}  // namespace evt::compiler
