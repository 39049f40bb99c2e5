#pragma once
// Writes a command's JSON results (--json), failing the command when the file cannot be written.

#include <fmt/format.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"

namespace evt::cli {

inline void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) fail(kFailed, fmt::format("cannot write {}", path));
}

}  // namespace evt::cli
