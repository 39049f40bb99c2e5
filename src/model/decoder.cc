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

std::string exec_names() {
  std::string s;
  for (const auto& [exec, name] : kExecNames) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

}  // namespace evt::model
