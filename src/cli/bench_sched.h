#pragma once
// `eventide bench sched`: the scheduler's own costs on the GPU.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_bench_sched_command(CLI::App& bench);

}  // namespace evt::cli
