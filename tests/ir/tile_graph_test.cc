// Instantiation for a binding: ids and names, per-element counts, tile-level edges, orders.

#include "ir/tile_graph.h"

#include <gtest/gtest.h>

#include "ir/text_form.h"

namespace evt::ir {
namespace {

TileGraph instance(const std::string& text, const Binding& b) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  static std::vector<std::unique_ptr<Graph>> keep;  // graphs outlive their instances
  keep.push_back(std::make_unique<Graph>(std::move(g).value()));
  auto tg = instantiate(*keep.back(), b);
  EXPECT_TRUE(tg.ok()) << tg.status().message();
  return std::move(tg).value();
}

constexpr const char* kSplitK = R"G(
B = dim()
E = event((B,), wait_count=4)
partial = call_device(partial_sum, tiles=(B, 4), out_edges={E: "ij->i"})
final = call_device(final_sum, tiles=(B,), in_edges={E: "i->i"})
)G";

TEST(TileGraph, IdsNamesAndEdges) {
  TileGraph tg = instance(kSplitK, {{"B", 3}});
  EXPECT_EQ(tg.num_tasks(), 15);
  EXPECT_EQ(tg.num_elements(), 3);
  EXPECT_EQ(tg.task_name(6), "partial(1, 2)");
  EXPECT_EQ(tg.task_name(13), "final(1)");
  EXPECT_EQ(tg.element_name(2), "E[2]");
  EXPECT_EQ(std::vector<int64_t>(tg.out_elements().row(6).begin(), tg.out_elements().row(6).end()), std::vector<int64_t>{1});
  EXPECT_EQ(std::vector<int64_t>(tg.in_elements().row(13).begin(), tg.in_elements().row(13).end()), std::vector<int64_t>{1});
  EXPECT_EQ(std::vector<int64_t>(tg.consumers().row(1).begin(), tg.consumers().row(1).end()), std::vector<int64_t>{13});
  EXPECT_EQ(tg.release_counts()[13], 1);
  EXPECT_EQ(tg.release_counts()[0], 0);
  for (int64_t x = 0; x < 3; ++x) {
    EXPECT_EQ(tg.initial_counts()[x], 4);
    EXPECT_EQ(tg.static_notifications()[x], 4);
  }
}

TEST(TileGraph, TopologicalOrderRespectsEveryEdge) {
  TileGraph tg = instance(kSplitK, {{"B", 5}});
  for (auto order : {std::vector<int64_t>(tg.topo_order().begin(), tg.topo_order().end()),
                     *tg.topological_order([](int64_t t) { return static_cast<uint64_t>(1000 - t); })}) {
    std::vector<int64_t> position(tg.num_tasks());
    for (size_t k = 0; k < order.size(); ++k) position[order[k]] = static_cast<int64_t>(k);
    for (int64_t t = 0; t < tg.num_tasks(); ++t) {
      for (int64_t x : tg.out_elements().row(t)) {
        for (int64_t c : tg.consumers().row(x)) EXPECT_LT(position[t], position[c]);
      }
    }
  }
}

TEST(TileGraph, InferredCountsArePerElementWhenUneven) {
  // 5 tiles halve onto 3 elements: E[0], E[1] get 2 notifications, E[2] gets 1.
  TileGraph tg = instance(R"G(
N = dim()
E = event(((N+1)//2,))
a = call_device(f, tiles=(N,), out_edges={E: "i->i//2"})
)G", {{"N", 5}});
  EXPECT_EQ(std::vector<int64_t>(tg.initial_counts().begin(), tg.initial_counts().end()), (std::vector<int64_t>{2, 2, 1}));
}

TEST(TileGraph, SlicesExpandAndRuntimeCountsStartUnset) {
  TileGraph tg = instance(R"G(
B = dim()
E = event((B, 3))
G = event((2,), wait_count=runtime)
a = call_device(f, tiles=(B,), out_edges={E: "i->(i, :)"})
s = call_device(f, tiles=(1,), sets=(G,))
)G", {{"B", 2}});
  EXPECT_EQ(tg.out_elements().row(1).size(), 3u);
  EXPECT_EQ(tg.initial_counts()[6], kWaitCountUnset);
  EXPECT_EQ(tg.events()[1].setter_group, 1);
}

TEST(TileGraph, DataDependentMapsResolveFromIndexData) {
  TileGraph tg = instance(R"G(
B = dim()
topk = buffer((B, 2), i32)
E = event((4,), wait_count=runtime)
a = call_device(f, tiles=(B,), out_edges={E: "i->topk[i, :]"})
)G", {{"B", 2}});
  const int32_t topk[] = {3, 1, 2, -1};  // task 1 routes to 2 and to nothing
  auto load = [&](const std::string&, std::span<const int64_t> idx) -> Expected<int64_t> { return topk[idx[0] * 2 + idx[1]]; };
  std::vector<int64_t> got;
  const Edge& edge = tg.graph().groups[0].out_edges[0];
  ASSERT_TRUE(tg.resolve(0, edge, load, [&](int64_t x) { got.push_back(x); }).ok());
  ASSERT_TRUE(tg.resolve(1, edge, load, [&](int64_t x) { got.push_back(x); }).ok());
  EXPECT_EQ(got, (std::vector<int64_t>{3, 1, 2}));
}

TEST(TileGraph, DataDependentEdgesOrderWholeGroups) {
  TileGraph tg = instance(R"G(
B = dim()
idx = buffer((B,), i32)
E = event((B,), wait_count=runtime)
a = call_device(f, tiles=(B,), sets=(E,))
b = call_device(f, tiles=(B,), out_edges={E: "i->idx[i]"})
c = call_device(f, tiles=(B,), in_edges={E: "i->i"})
)G", {{"B", 3}});
  ASSERT_EQ(tg.group_predecessors(2).size(), 1u);
  EXPECT_EQ(tg.group_predecessors(2)[0].group, 1);
  EXPECT_FALSE(tg.group_predecessors(2)[0].same_layer);
  auto order = tg.topo_order();
  auto pos = [&](int64_t t) { return std::find(order.begin(), order.end(), t) - order.begin(); };
  for (int64_t bt = 3; bt < 6; ++bt) {
    for (int64_t ct = 6; ct < 9; ++ct) EXPECT_LT(pos(bt), pos(ct));
  }
}

// A layer's routing releases that layer's expert tiles (a range trigger and a data-dependent
// notify, as the MoE decode graph has), and each layer feeds the next: ordering the whole groups
// would close a cycle through the layer chain (layer 1's plan before layer 0's experts, which
// precede layer 1), so the groups are ordered layer by layer. Edges that leave the layer still
// order the whole groups.
TEST(TileGraph, LayeredDataDependentEdgesOrderEachLayer) {
  const char* text = R"G(
L = dim()
X = dim()
ptr = buffer((L, X+1), i32)
owner = buffer((L, X), i32)
In = event((L+1,), wait_count=X)
Exp = event((L, X), wait_count=1)
Act = event((L, X), wait_count=runtime)
plan = call_device(f, tiles=(L,), in_edges={In: "l->l"}, out_edges={Exp: "l->(l, :)"}, sets=(Act,), layered=true)
expert = call_device(f, tiles=(L, X), in_edges={Exp: "le->[l*X + ptr[l, e], l*X + ptr[l, e+1])"},
                     out_edges={Act: "li->(l, owner[l, i])"}, layered=true)
next = call_device(f, tiles=(L, X), in_edges={Act: "li->(l, i)"}, out_edges={In: "li->l+1"}, layered=true)
)G";
  TileGraph tg = instance(text, {{"L", 3}, {"X", 2}});
  ASSERT_EQ(tg.group_predecessors(1).size(), 1u);
  EXPECT_EQ(tg.group_predecessors(1)[0].group, 0);
  EXPECT_TRUE(tg.group_predecessors(1)[0].same_layer);
  auto order = tg.topo_order();
  auto pos = [&](int64_t t) { return std::find(order.begin(), order.end(), t) - order.begin(); };
  for (int64_t l = 0; l < 3; ++l) {
    for (int64_t i = 0; i < 2; ++i) EXPECT_LT(pos(l), pos(3 + 2 * l + i)) << "layer " << l;  // plan(l) first
    if (l > 0) {
      EXPECT_LT(pos(9 + 2 * (l - 1)), pos(l)) << "layer " << l;  // after next(l - 1)
    }
  }

  // A trigger whose event is not per layer orders the whole groups: the cycle is reported.
  std::string whole = text;
  whole.replace(whole.find("Exp = event((L, X)"), 18, "Exp = event((X, L)");
  whole.replace(whole.find("\"l->(l, :)\""), 11, "\"l->(:, l)\"");
  auto g = parse_graph(whole);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto cyclic = instantiate(*g, {{"L", 3}, {"X", 2}});
  ASSERT_FALSE(cyclic.ok());
  EXPECT_NE(cyclic.status().message().find("all tasks of group plan (data-dependent edge)"), std::string::npos)
      << cyclic.status().message();
}

TEST(TileGraph, ErrorsNameTheProblem) {
  auto g = parse_graph("B = dim()\nE = event((B,))\na = call_device(f, tiles=(B,), out_edges={E: \"i->i+1\"})\n");
  ASSERT_TRUE(g.ok());
  auto tg = instantiate(*g, {{"B", 2}});
  ASSERT_FALSE(tg.ok());
  EXPECT_NE(tg.status().message().find("task group a, edge {E: \"i->i+1\"}, tile (1): coordinate 0 of event E is 2, outside [0, 2)"),
            std::string::npos) << tg.status().message();
  auto unbound = instantiate(*g, {});
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.status().message().find("no value for dimension 'B'"), std::string::npos);
}

}  // namespace
}  // namespace evt::ir
