// The megakernel codegen's shared tasks (TileFunction::device_task): the classes that share a
// runner reach it through one call in the body dispatch and one in the stream dispatch, so that
// its code is in the kernel once; a row that builds a task but names no runner is refused, naming
// the group and the tile function.

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

}  // namespace
}  // namespace evt
