#include "model/decoder.h"

#include <array>
#include <utility>

namespace evt::model {

namespace {
constexpr std::array<std::pair<Exec, std::string_view>, 6> kExecNames = {{
    {Exec::kReference, "reference"},
    {Exec::kMegakernel, "megakernel"},
    {Exec::kMegakernelDynamic, "megakernel-dynamic"},
    {Exec::kMegakernelMixed, "megakernel-mixed"},
    {Exec::kKernels, "kernels"},
    {Exec::kGraphs, "graphs"},
}};
}  // namespace

std::string_view exec_name(Exec e) {
  for (const auto& [exec, name] : kExecNames) {
    if (exec == e) return name;
  }
  return "?";
}

std::optional<Exec> parse_exec(std::string_view name) {
  for (const auto& [exec, n] : kExecNames) {
    if (n == name) return exec;
  }
  return std::nullopt;
}

Status Decoder::set_tuning(std::shared_ptr<const TuningTable> table) {
  if (table != nullptr && table->shapes != model_shapes(config())) {
    return error("the tuning table was measured for a model of {}, but this one has {}", table->shapes,
                 model_shapes(config()));
  }
  tuning_ = std::move(table);
  return Status();
}

Tiling Decoder::step_tiling(int64_t tokens, int64_t longest_context) const {
  return tuned_tiling(default_tiling(config(), tokens, longest_context, tiling_workers()), tuning_.get(), tokens,
                      longest_context);
}

std::string exec_names() {
  std::string s;
  for (const auto& [exec, name] : kExecNames) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

}  // namespace evt::model
