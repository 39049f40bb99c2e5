#pragma once
// `eventide bench serve`: an online serving benchmark against a running OpenAI-compatible server,
// measured as vLLM's `bench serve` measures it.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_bench_serve_command(CLI::App& bench);

}  // namespace evt::cli
