#pragma once
// `eventide generate`: greedy generation from token ids, with the per-token latency.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_generate_command(CLI::App& app);

}  // namespace evt::cli
