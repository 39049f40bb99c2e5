#include "ir/graph.h"

#include <algorithm>

namespace evt::ir {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  int bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF32, "f32", 4}, {DType::kBF16, "bf16", 2}, {DType::kF16, "f16", 2},
    {DType::kI32, "i32", 4}, {DType::kI64, "i64", 8},
};

template <typename T>
const T* find_named(const std::vector<T>& v, const std::string& n) {
  auto it = std::find_if(v.begin(), v.end(), [&](const T& x) { return x.name == n; });
  return it == v.end() ? nullptr : &*it;
}

template <typename T>
int index_named(const std::vector<T>& v, const std::string& n) {
  const T* p = find_named(v, n);
  return p ? static_cast<int>(p - v.data()) : -1;
}
}  // namespace

const char* dtype_name(DType t) {
  for (const auto& d : kDTypes) {
    if (d.type == t) return d.name;
  }
  return "?";
}

int dtype_bytes(DType t) {
  for (const auto& d : kDTypes) {
    if (d.type == t) return d.bytes;
  }
  return 0;
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.type;
  }
  return std::nullopt;
}

const Buffer* Graph::find_buffer(const std::string& n) const { return find_named(buffers, n); }
const Event* Graph::find_event(const std::string& n) const { return find_named(events, n); }
const TaskGroup* Graph::find_group(const std::string& n) const { return find_named(groups, n); }
int Graph::event_index(const std::string& n) const { return index_named(events, n); }
int Graph::buffer_index(const std::string& n) const { return index_named(buffers, n); }
bool Graph::has_dim(const std::string& n) const { return std::find(dims.begin(), dims.end(), n) != dims.end(); }

std::optional<int64_t> layer_offset(const Graph& graph, const TaskGroup& group, const Edge& edge) {
  const EdgeMap& m = edge.map;
  if (!group.layered || group.tiles.empty() || m.vars.empty()) return std::nullopt;
  if (m.kind == EdgeMap::Kind::kRangeTrigger) {
    const Event* ev = graph.find_event(edge.event);
    return ev && !ev->shape.empty() && provably_equal(ev->shape[0], group.tiles[0]) ? std::optional<int64_t>(0)
                                                                                     : std::nullopt;
  }
  if (m.coords.empty() || m.coords[0].kind != Coord::Kind::kScalar || !is_data_independent(m.coords[0].expr)) {
    return std::nullopt;
  }
  return constant_value(m.coords[0].expr - Expr::var(m.vars[0]));
}

bool single_element_trigger(const Graph& graph, const TaskGroup& group, const Edge& edge) {
  if (edge.map.kind != EdgeMap::Kind::kRangeTrigger) return false;
  const Event* ev = graph.find_event(edge.event);
  if (ev == nullptr) return false;
  if (layer_offset(graph, group, edge)) return ev->shape.size() == 1;
  return std::all_of(ev->shape.begin(), ev->shape.end(), [](const Expr& d) { return constant_value(d) == 1; });
}

bool waited_by_tile(const Graph& graph, const TaskGroup& group, const Edge& edge) {
  return (edge.map.kind == EdgeMap::Kind::kMap && edge.map.is_data_independent()) ||
         single_element_trigger(graph, group, edge);
}

std::string Edge::str() const { return "{" + event + ": \"" + map.str() + "\"}"; }

std::string binding_str(const Binding& b) {
  std::string s;
  for (const auto& [k, v] : b) s += (s.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return s;
}

std::string coords_str(const std::vector<int64_t>& c) {
  std::string s = "(";
  for (size_t i = 0; i < c.size(); ++i) s += (i ? ", " : "") + std::to_string(c[i]);
  return s + ")";
}

}  // namespace evt::ir
