// evt_codegen: writes the megakernel source for a graph file. CMake runs it at build time on the
// graphs the binary ships (AOT); nothing is generated or compiled at run time.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>

#include "compiler/codegen/megakernel_codegen.h"
#include "compiler/pipeline.h"
#include "ir/text_form.h"

int main(int argc, char** argv) {
  CLI::App app{"Generate the persistent megakernel source (a C++/CUDA header) for an Event Tensor graph"};
  std::string file, ns, out;
  bool no_verify = false;
  app.add_option("file", file, "graph file")->required()->check(CLI::ExistingFile);
  app.add_option("--ns", ns, "C++ namespace for the generated code, under evt::generated")->required();
  app.add_option("-o,--out", out, "output header")->required();
  app.add_flag("--no-verify", no_verify, "skip the verifier (for tests of the run-time safety nets)");
  CLI11_PARSE(app, argc, argv);

  auto g = evt::ir::load_graph_file(file);
  if (!g.ok()) {
    fmt::print(stderr, "{}\n", g.status().message());
    return 1;
  }
  evt::compiler::PassContext ctx{{}, &evt::kernels::Registry::builtins(), true, {}};
  evt::compiler::PipelineOptions po;
  po.skip_verify = no_verify;
  if (auto s = evt::compiler::run_pipeline(*g, ctx, po); !s.ok()) {
    fmt::print(stderr, "{}: {}\n", file, s.message());
    return 1;
  }
  auto source = evt::compiler::generate_megakernel(*g, evt::kernels::Registry::builtins(), {ns});
  if (!source.ok()) {
    fmt::print(stderr, "{}: {}\n", file, source.status().message());
    return 1;
  }
  std::ofstream(out) << *source;
  return 0;
}
