#pragma once
// `eventide graph verify|print|run`: work with Event Tensor graph files.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_graph_command(CLI::App& app);

}  // namespace evt::cli
