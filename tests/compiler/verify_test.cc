// The verifier accepts the examples and rejects mutated graphs with messages that name the
// task group, the edge and an offending coordinate.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "compiler/infer_wait_counts.h"
#include "compiler/pipeline.h"
#include "compiler/verify.h"
#include "ir/text_form.h"
#include "support/graph_fixtures.h"

namespace evt {
namespace {

std::string read_example(const std::string& name) {
  std::ifstream in(testing::example_path(name));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "fixture lacks: " << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

struct Outcome {
  Status status;
  std::vector<std::string> notes;
};

Outcome verify_text(const std::string& text, std::vector<ir::Binding> bindings = {}, bool dynamic = true) {
  auto g = ir::parse_graph(text, "test.evt");
  EXPECT_TRUE(g.ok()) << g.status().message();
  if (!g.ok()) return {g.status(), {}};
  compiler::PassContext ctx{std::move(bindings), &testing::registry_with_noop(), dynamic, {}};
  Status s = compiler::run_pipeline(*g, ctx);
  return {s, ctx.notes};
}

void expect_error(const Outcome& o, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(o.status.ok()) << "expected an error";
  for (const auto& f : fragments) EXPECT_NE(o.status.message().find(f), std::string::npos) << o.status.message();
}

bool has_note(const Outcome& o, const std::string& fragment) {
  for (const auto& n : o.notes) {
    if (n.find(fragment) != std::string::npos) return true;
  }
  return false;
}

TEST(Verify, AcceptsExamplesAndProvesSplitKCount) {
  Outcome splitk = verify_text(read_example("splitk.evt"));
  ASSERT_TRUE(splitk.status.ok()) << splitk.status.message();
  EXPECT_TRUE(has_note(splitk, "E: wait_count=4 proved for every binding"));
  Outcome moe = verify_text(read_example("moe_routed.evt"), {{{"B", 5}}, {{"B", 64}}});
  ASSERT_TRUE(moe.status.ok()) << moe.status.message();
  EXPECT_TRUE(has_note(moe, "Routed: wait count inferred as B"));
  EXPECT_TRUE(has_note(moe, "Grouped: run-time wait count"));
}

TEST(Verify, WrongWaitCountNamesEventElementAndProducers) {
  Outcome o = verify_text(replace(read_example("splitk.evt"), "wait_count=4", "wait_count=3"), {{{"B", 17}}});
  expect_error(o, {"event E: E[0] has wait_count=3 but receives 4 notifications",
                   "partial(0, 0) through out-edge {E: \"ij->i\"}", "for B=17", "17 elements differ"});
}

TEST(Verify, WrongSymbolicCountIsCaughtForSampleBindings) {
  Outcome o = verify_text(replace(read_example("splitk.evt"), "wait_count=4", "wait_count=B"));
  expect_error(o, {"event E: E[0] has wait_count=1 but receives 4 notifications", "for B=1"});
}

TEST(Verify, InferredCountsHaveClosedForms) {
  auto g = ir::parse_graph(R"G(
N = dim()
E = event((N,))
F = event((N, 3))
H = event((1,))
a = call_device(x, tiles=(2*N, 5), out_edges={E: "ij->i//2", F: "ij->(i//2, :)", H: "ij->0"})
)G");
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const auto& [event, count] : std::vector<std::pair<std::string, std::string>>{
           {"E", "10"}, {"F", "10"}, {"H", "N*10"}}) {
    auto c = compiler::proved_notification_count(*g, *g->find_event(event));
    ASSERT_TRUE(c.has_value()) << event;
    EXPECT_EQ(c->str(), count) << event;
  }
}

TEST(Verify, CycleIsReportedWithItsTasks) {
  Outcome o = verify_text(R"G(
B = dim()
E = event((B,))
F = event((B,))
a = call_device(noop, tiles=(B,), in_edges={F: "i->i"}, out_edges={E: "i->i"})
b = call_device(noop, tiles=(B,), in_edges={E: "i->i"}, out_edges={F: "i->i"})
)G", {{{"B", 2}}});
  expect_error(o, {"cycle", "task a(0)", "event E[0]", "task b(0)", "event F[0]"});
}

TEST(Verify, ChainWithinOneGroupIsAcyclic) {
  Outcome o = verify_text(R"G(
B = dim()
E = event((B, 4))
chain = call_device(noop, tiles=(B, 3), in_edges={E: "ij->(i, j)"}, out_edges={E: "ij->(i, j+1)"})
first = call_device(noop, tiles=(B,), out_edges={E: "i->(i, 0)"})
)G");
  EXPECT_TRUE(o.status.ok()) << o.status.message();
}

TEST(Verify, MissingProducerIsNamed) {
  Outcome o = verify_text(replace(read_example("splitk.evt"), ", out_edges={E: \"ij->i\"}", ""));
  expect_error(o, {"task group final, in-edge {E: \"i->i\"}: waits on event E, but no task group notifies it"});
}

TEST(Verify, OutOfRangeMapNamesTileAndCoordinate) {
  Outcome o = verify_text(R"G(
B = dim()
E = event((B, 4))
a = call_device(noop, tiles=(B, 4), out_edges={E: "ij->(i, j+1)"})
b = call_device(noop, tiles=(B, 4), in_edges={E: "ij->(i, j)"})
)G", {{{"B", 2}}});
  expect_error(o, {"task group a, edge {E: \"ij->(i, j+1)\"}, tile (0, 3): coordinate 1 of event E is 4, outside [0, 4)"});
}

TEST(Verify, RankMismatchIsNamed) {
  Outcome o = verify_text(R"G(
B = dim()
E = event((B,))
a = call_device(noop, tiles=(B, 4), out_edges={E: "i->i"})
)G");
  expect_error(o, {"task group a, out-edge {E: \"i->i\"}: the map has 1 tile variables but the grid has rank 2"});
}

constexpr const char* kIndirect = R"G(
B = dim()
idx = buffer((B,), i32)
E = event((8,))
producer = call_device(noop, tiles=(8,), out_edges={E: "i->i"})
consumer = call_device(noop, tiles=(B,), in_edges={E: "i->idx[i]"})
)G";

TEST(Verify, DataDependentInEdgeNeedsInverseForDynamicScheduling) {
  expect_error(verify_text(kIndirect), {"task group consumer, in-edge {E: \"i->idx[i]\"}", "needs its inverse"});
  Outcome static_only = verify_text(kIndirect, {}, /*dynamic=*/false);
  EXPECT_TRUE(static_only.status.ok()) << static_only.status.message();
}

TEST(Verify, RuntimeCountMustBeSetBeforeNotification) {
  std::string text = read_example("moe_routed.evt");
  text = replace(text, "in_edges={Counted: \"i->0\"}, out_edges={Grouped:", "out_edges={Grouped:");
  expect_error(verify_text(text, {{{"B", 4}}}),
               {"event Grouped: its run-time wait count is set by task group count, but task group gather notifies "
                "it through out-edge {Grouped: \"i->topk[i, :]\"} without waiting for count first"});
}

TEST(Verify, RuntimeCountNeedsASetter) {
  std::string text = replace(read_example("moe_routed.evt"), ", sets=(Grouped,)", "");
  expect_error(verify_text(text, {{{"B", 4}}}), {"event Grouped: wait_count=runtime needs exactly one task group"});
}

TEST(Verify, IndexBufferMustBeReadyBeforeRangeTrigger) {
  std::string text = replace(read_example("moe_routed.evt"), "in_edges={Counted: \"t->0\", Grouped:", "in_edges={Grouped:");
  expect_error(verify_text(text, {{{"B", 4}}}),
               {"task group expert, in-edge {Grouped: \"e->[indptr[e], indptr[e+1])\"}: index buffer indptr is "
                "written by task group count"});
}

// One element (Counted) releases every expert tile: the static schedule waits for it before it
// reads the range, so the index buffer its producer (count) wrote needs no other guard. The test
// above is the same graph with an element per expert, where the task reads the buffer first.
TEST(Verify, SingleElementTriggerOrdersItsIndexBuffer) {
  const std::string text = replace(read_example("moe_routed.evt"),
                                   "in_edges={Counted: \"t->0\", Grouped: \"e->[indptr[e], indptr[e+1])\"}",
                                   "in_edges={Counted: \"e->[0, indptr[8])\"}");
  Outcome o = verify_text(text, {{{"B", 4}}});
  EXPECT_TRUE(o.status.ok()) << o.status.message();
}

TEST(Verify, DataDependentCountCannotBeInferred) {
  std::string text = replace(read_example("moe_routed.evt"), "Done = event((B,), wait_count=2)", "Done = event((B,))");
  expect_error(verify_text(text), {"event Done: its wait count cannot be inferred", "of task group expert is data-dependent"});
}

TEST(Verify, InlineGroupAwaitsOneElement) {
  const std::string splitk = read_example("splitk.evt");
  // Two in-edges: which notification would run it?
  std::string text = replace(splitk, "E = event((B,), wait_count=4)", "E = event((B,), wait_count=4)\nF = event((B,))");
  text = replace(text, "out_edges={E: \"ij->i\"})", "out_edges={E: \"ij->i\", F: \"ij->i\"})");
  text = replace(text, "F = event((B,))", "F = event((B,), wait_count=4)");
  text = replace(text, "in_edges={E: \"i->i\"}", "in_edges={E: \"i->i\", F: \"i->i\"}");
  expect_error(verify_text(text), {"task group final: schedule=inline needs exactly one in-edge"});
  // A slice: several elements per task.
  text = replace(splitk, "E = event((B,), wait_count=4)", "E = event((B, 4), wait_count=1)");
  text = replace(text, "out_edges={E: \"ij->i\"}", "out_edges={E: \"ij->(i, j)\"}");
  text = replace(text, "in_edges={E: \"i->i\"}", "in_edges={E: \"i->(i, :)\"}");
  expect_error(verify_text(text), {"task group final: schedule=inline needs", "one element per task"});
}

TEST(Verify, TileFunctionArityIsChecked) {
  std::string text = replace(read_example("splitk.evt"), "reads=(P,), writes=(C,)", "reads=(P, A), writes=(C,)");
  expect_error(verify_text(text), {"task group final: tile function final_sum takes 1 reads and 1 writes, but the group passes 2 and 1"});
}

TEST(Verify, NonIntegerIndexBufferIsRejected) {
  std::string text = replace(read_example("moe_routed.evt"), "topk = buffer((B, 2), i32)", "topk = buffer((B, 2), f32)");
  expect_error(verify_text(text), {"index buffer topk has dtype f32"});
}

TEST(Verify, UnboundDimIsAnError) {
  expect_error(verify_text(read_example("splitk.evt"), {{{"T", 3}}}), {"no value for dimension 'B'"});
}

}  // namespace
}  // namespace evt
