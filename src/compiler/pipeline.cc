#include "compiler/pipeline.h"

#include <cstring>

#include "compiler/infer_wait_counts.h"
#include "compiler/verify.h"
#include "ir/text_form.h"

namespace evt::compiler {

std::span<const Pass> pipeline_passes() {
  static constexpr Pass kPasses[] = {
      {"infer_wait_counts", infer_wait_counts},
      {"verify", verify},
  };
  return kPasses;
}

Status run_pipeline(ir::Graph& g, PassContext& ctx, const PipelineOptions& options) {
  bool known = options.print_after.empty();
  for (const Pass& p : pipeline_passes()) known = known || options.print_after == p.name;
  if (!known) {
    std::string names;
    for (const Pass& p : pipeline_passes()) names += (names.empty() ? "" : ", ") + std::string(p.name);
    return error("--print-after: unknown pass '{}' (passes: {})", options.print_after, names);
  }
  for (const Pass& p : pipeline_passes()) {
    if (options.skip_verify && std::strcmp(p.name, "verify") == 0) continue;
    EVT_RETURN_IF_ERROR(p.run(g, ctx));
    if (options.print_after == p.name && options.print) options.print(ir::print_graph(g));
  }
  return Status();
}

}  // namespace evt::compiler
