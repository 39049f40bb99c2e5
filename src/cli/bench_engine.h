#pragma once
// `eventide bench engine`: an offline serving workload through the engine.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_bench_engine_command(CLI::App& bench);

}  // namespace evt::cli
