#pragma once
// Codegen: lowers a verified graph to the C++/CUDA source of one persistent megakernel. Edge maps
// become inline index arithmetic, task groups become cases of one dispatch, and the static and
// dynamic worker loops are emitted against the worker interface of runtime/megakernel/support.h,
// so the same generated code runs on CUDA blocks and, in CI, on CPU threads.
//
// Static schedule: worker w runs positions w, w + W, w + 2W, ... of a group-major order whose
// groups are topologically sorted; no per-binding queues are built. Dynamic schedule: a global
// ready queue; a fired event releases its consumers through the inverse of their in-edge maps.

#include <string>

#include "ir/graph.h"
#include "kernels/registry.h"
#include "util/status.h"

namespace evt::compiler {

struct CodegenOptions {
  std::string ns;  // C++ namespace under evt::generated
};

// The header text. Errors name the group or edge the generator cannot lower (for example an
// in-edge with no closed-form inverse under dynamic scheduling).
Expected<std::string> generate_megakernel(const ir::Graph& g, const kernels::Registry& registry,
                                          const CodegenOptions& options);

}  // namespace evt::compiler
