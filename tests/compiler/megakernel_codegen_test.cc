// The megakernel codegen's shared tasks (TileFunction::device_task): the classes that share a
// runner reach it through one call in the body dispatch and one in the stream dispatch, so that
// its code is in the kernel once; a row that builds a task but names no runner is refused, naming
// the group and the tile function. And when the loader may compute a stream that reads what an
// event guards (TileFunction::stream_after).

#include <gtest/gtest.h>

#include <string>

#include "compiler/codegen/megakernel_codegen.h"
#include "compiler/pipeline.h"
#include "ir/text_form.h"

namespace evt {
namespace {

// Two stages whose tile functions share one task form, then one with a body of its own.
constexpr const char* kGraph = R"(graph shared_tasks
B = dim()
X = buffer((B, 16), f32)
Y = buffer((B, 16), f32)
Z = buffer((B, 16), f32)
E = event((B,), wait_count=1)
F = event((B,), wait_count=1)
first = call_device(proj_a, tiles=(B,), reads=(X,), writes=(Y,), out_edges={E: "i->i"})
second = call_device(proj_b, tiles=(B,), reads=(Y,), writes=(Z,), in_edges={E: "i->i"}, out_edges={F: "i->i"})
third = call_device(own_body, tiles=(B,), reads=(Z,), writes=(X,), in_edges={F: "i->i"})
)";

kernels::TileFunction row(const std::string& name, bool shared) {
  kernels::TileFunction f{.name = name,
                          .summary = "codegen test row",
                          .num_reads = 1,
                          .num_writes = 1,
                          .cpu = [](const kernels::TileArgs&) {},
                          .device_body = "test::" + name + "_body",
                          .device_header = "test/rows.h"};
  if (shared) {
    f.device_task = "test::" + name + "_task";
    f.shared = kernels::SharedTask{.type = "test::Task", .run = "test::run", .stream = "test::stream"};
  }
  return f;
}

Expected<std::string> generate(const kernels::Registry& registry) {
  auto g = ir::parse_graph(kGraph, "shared_tasks.evt");
  if (!g.ok()) return g.status();
  compiler::PassContext ctx{{}, &registry, true, {}};
  if (Status s = compiler::run_pipeline(*g, ctx); !s.ok()) return s;
  return compiler::generate_megakernel(*g, registry, {"shared_tasks"});
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(MegakernelCodegen, ClassesSharingATaskReachItsRunnerThroughOneCall) {
  kernels::Registry registry;
  registry.add(row("proj_a", true));
  registry.add(row("proj_b", true));
  registry.add(row("own_body", false));
  const auto text = generate(registry);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(count(*text, "test::run(SharedBlock<W, kS>{w, p, a, r}, task)"), 1u) << *text;
  EXPECT_EQ(count(*text, "test::stream(SharedBlock<W, kS>{w, p, a, r}, task)"), 1u);
  EXPECT_EQ(count(*text, "return test::proj_a_task(t, reads, writes);"), 1u);
  EXPECT_EQ(count(*text, "return test::proj_b_task(t, reads, writes);"), 1u);
  // The shared rows' own bodies are for the tile tests; the kernel calls only the third's.
  EXPECT_EQ(count(*text, "test::proj_a_body("), 0u);
  EXPECT_EQ(count(*text, "test::own_body_body("), 1u);
}

TEST(MegakernelCodegen, ATaskWithoutARunnerIsRefusedNamingTheGroupAndFunction) {
  kernels::Registry registry;
  kernels::TileFunction broken = row("proj_a", true);
  broken.shared.run.clear();
  registry.add(broken);
  registry.add(row("proj_b", true));
  registry.add(row("own_body", false));
  const auto text = generate(registry);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("task group first"), std::string::npos) << text.status().message();
  EXPECT_NE(text.status().message().find("proj_a"), std::string::npos) << text.status().message();
  EXPECT_NE(text.status().message().find("no type, runner or stream"), std::string::npos) << text.status().message();
}

// A plan-like stage writes a table and notifies PLANNED; the expert stage waits for PLANNED and for
// its activations' element, which a range trigger over the table finds.
constexpr const char* kRoutedGraph = R"evt(graph routed
B = dim()
E = dim()
X = buffer((B, 16), f32)
table = buffer((E+1,), i32)
Y = buffer((B, 16), f32)
PLANNED = event((1,), wait_count=1)
ACT = event((E,), wait_count=1)
plan = call_device(plan_row, tiles=(1,), reads=(X,), writes=(table,), out_edges={PLANNED: "i->i"})
fill = call_device(fill_row, tiles=(E,), reads=(X,), writes=(Y,), in_edges={PLANNED: "e->0"}, out_edges={ACT: "e->e"})
expert = call_device(expert_row, tiles=(B,), reads=(Y, table), writes=(X,),
                     in_edges={PLANNED: "i->0", ACT: "e->[table[e], table[e+1])"})
)evt";

Expected<std::string> generate_routed(kernels::StreamAfter after, const std::string& graph = kRoutedGraph) {
  kernels::Registry registry;
  registry.add(row("plan_row", false));
  registry.add(row("fill_row", false));
  kernels::TileFunction expert = row("expert_row", false);
  expert.num_reads = 2;
  expert.device_stream = "test::expert_stream";
  expert.stream_after = after;
  registry.add(expert);
  auto g = ir::parse_graph(graph, "routed.evt");
  if (!g.ok()) return g.status();
  compiler::PassContext ctx{{}, &registry, true, {}};
  if (Status s = compiler::run_pipeline(*g, ctx); !s.ok()) return s;
  return compiler::generate_megakernel(*g, registry, {"routed"});
}

// The text of the generated function that starts with `signature`, to its closing brace (the
// first line indented as the signature's).
std::string function_text(const std::string& text, const std::string& signature) {
  const size_t at = text.find(signature);
  if (at == std::string::npos) return "";
  const size_t line = text.rfind('\n', at) + 1;
  return text.substr(at, text.find("\n" + text.substr(line, at - line) + "}", at) - at);
}

// A kGuards stream: the loader waits for PLANNED itself, not for the searched ACT element nor
// for the leader's word; a kWait stream is announced after the leader's whole wait, as before.
TEST(MegakernelCodegen, TheLoaderWaitsOnlyForWhatGuardsAStreamAfterGuards) {
  const auto text = generate_routed(kernels::StreamAfter::kGuards);
  ASSERT_TRUE(text.ok()) << text.status().message();
  const std::string loader_wait = function_text(*text, "EVT_HD inline int loader_wait_class_");
  ASSERT_FALSE(loader_wait.empty()) << *text;
  // The class's events are run-time references; the comments name each waited edge's map.
  EXPECT_NE(loader_wait.find("// in-edge r.event[0]: \"i->0\""), std::string::npos) << loader_wait;
  EXPECT_EQ(count(loader_wait, "wait_event("), 1u) << loader_wait;
  EXPECT_EQ(loader_wait.find("table"), std::string::npos) << loader_wait;
  EXPECT_NE(function_text(*text, "EVT_HD inline bool group_loader_waits(int group)").find("case 2: return true;"),
            std::string::npos)
      << "group 2, expert: the loader waits";
  const std::string announced = function_text(*text, "EVT_HD inline bool group_announced(int group)");
  EXPECT_EQ(announced.find("return true"), std::string::npos) << announced;

  const auto after_wait = generate_routed(kernels::StreamAfter::kWait);
  ASSERT_TRUE(after_wait.ok()) << after_wait.status().message();
  EXPECT_EQ(function_text(*after_wait, "EVT_HD inline int loader_wait_class_"), "");
  EXPECT_NE(function_text(*after_wait, "EVT_HD inline bool group_announced(int group)").find("case 2: return true;"),
            std::string::npos);
}

// Without PLANNED the loader would have nothing to wait for before it reads the table.
TEST(MegakernelCodegen, AStreamAfterGuardsWithoutAGuardIsRefused) {
  std::string graph = kRoutedGraph;
  const std::string guarded = "in_edges={PLANNED: \"i->0\", ACT:";
  const size_t at = graph.find(guarded);
  ASSERT_NE(at, std::string::npos);
  graph.replace(at, guarded.size(), "in_edges={ACT:");
  const auto text = generate_routed(kernels::StreamAfter::kGuards, graph);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("task group expert: tile function expert_row's weight stream reads what"),
            std::string::npos)
      << text.status().message();
}

}  // namespace
}  // namespace evt
