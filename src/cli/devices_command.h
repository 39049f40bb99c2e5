#pragma once
// `eventide devices`: the CUDA devices this binary sees.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_devices_command(CLI::App& app);

}  // namespace evt::cli
