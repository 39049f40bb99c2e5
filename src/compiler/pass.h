#pragma once
// Passes are stateless functions `Status pass(ir::Graph&, PassContext&)`; what they learn that is
// not IR goes into the context's notes, which `eventide graph verify` prints.

#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/registry.h"
#include "util/status.h"

namespace evt::compiler {

struct PassContext {
  // Bindings for the concrete checks; when empty, the verifier picks a small sample.
  std::vector<ir::Binding> bindings;
  // When set, task groups must name rows of this registry with the right arity.
  const kernels::Registry* registry = nullptr;
  // The graph may run under dynamic scheduling, so data-dependent in-edges need an inverse.
  bool dynamic_scheduling = true;
  std::vector<std::string> notes;
};

using PassFn = Status (*)(ir::Graph&, PassContext&);

struct Pass {
  const char* name;
  PassFn run;
};

}  // namespace evt::compiler
