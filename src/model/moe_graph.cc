#include "model/moe_graph.h"

#include <algorithm>

namespace evt::model {

namespace {

template <class T>
T* find_named(std::vector<T>& items, const std::string& name) {
  auto it = std::find_if(items.begin(), items.end(), [&](const T& x) { return x.name == name; });
  return it == items.end() ? nullptr : &*it;
}

}  // namespace

Expected<ir::Graph> moe_decode_graph(ir::Graph g) {
  ir::TaskGroup* gate_up = find_named(g.groups, "gate_up");
  ir::TaskGroup* down = find_named(g.groups, "down");
  ir::Buffer* act = find_named(g.buffers, "act");
  ir::Event* act_done = find_named(g.events, "ACT");
  if (gate_up == nullptr || down == nullptr || act == nullptr || act_done == nullptr || !g.has_dim("T") ||
      !g.has_dim("L")) {
    return error("{}: the MoE decode graph replaces the groups gate_up and down, the buffer act and the event ACT "
                 "over dims T and L; one of them is missing",
                 g.name);
  }
  const ir::Expr tokens = ir::Expr::var("T"), layers = ir::Expr::var("L");
  g.name += "_moe";
  g.dims.push_back("XK");
  g.dims.push_back("XA");
  act->shape = {tokens, ir::Expr::var("XA")};
  g.buffers.push_back({.name = "route_ids", .shape = {tokens, ir::Expr::var("XK")}, .dtype = ir::DType::kI32});
  g.buffers.push_back({.name = "route_w", .shape = {tokens, ir::Expr::var("XK")}, .dtype = ir::DType::kF32});
  // One task per (layer, token) now: its in- and out-edges ("ln->l") read only the layer.
  gate_up->function = "moe_gate_up";
  gate_up->tiles = {layers, tokens};
  gate_up->writes = {"act", "route_ids", "route_w"};
  act_done->wait = ir::WaitCount{ir::WaitCount::Kind::kExplicit, tokens};
  down->function = "moe_down";
  down->reads = {"cfg", "wtab", "act", "route_ids", "route_w", "x_mid"};
  return g;
}

void bind_moe_dims(const ModelConfig& c, std::map<std::string, int64_t>& dims) {
  const int64_t top_k = c.moe->num_experts > 0 ? c.moe->num_experts_per_tok : 0;
  dims["XK"] = std::max<int64_t>(1, top_k);
  dims["XA"] = std::max(c.intermediate_size, top_k * c.moe->moe_intermediate_size);
}

}  // namespace evt::model
