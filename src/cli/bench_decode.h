#pragma once
// `eventide bench decode`: decode-step latency of real model shapes against the floor.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_bench_decode_command(CLI::App& bench);

}  // namespace evt::cli
