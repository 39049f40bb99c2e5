#pragma once
// The compiler pipeline: one list of passes, run in order. `print_after` names a pass after
// which the graph is printed in text form (`--print-after`).

#include <functional>
#include <span>
#include <string>

#include "compiler/pass.h"

namespace evt::compiler {

std::span<const Pass> pipeline_passes();

struct PipelineOptions {
  std::string print_after;          // a pass name, or empty
  bool skip_verify = false;         // for tests of the run-time safety nets only
  std::function<void(const std::string&)> print;  // receives the printed graph
};

Status run_pipeline(ir::Graph& g, PassContext& ctx, const PipelineOptions& options = {});

}  // namespace evt::compiler
