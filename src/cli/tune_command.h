#pragma once
// `eventide tune`: the tuning table of a model's decode step splits (model/tuning_table.h).

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_tune_command(CLI::App& app);

}  // namespace evt::cli
