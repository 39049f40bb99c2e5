#pragma once
// `eventide make-model`: write a checkpoint with a real model's shapes and random weights.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_make_model_command(CLI::App& app);

}  // namespace evt::cli
