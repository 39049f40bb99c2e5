#pragma once
// `eventide bench moe`: the MoE block of a Qwen3-MoE layer inside real decode steps, per token
// count and exec mode, against the floor of the experts its tokens chose.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_bench_moe_command(CLI::App& bench);

}  // namespace evt::cli
