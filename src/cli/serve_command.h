#pragma once
// `eventide serve`: the OpenAI-compatible HTTP server (server/server.h) over the engine.

#include <CLI/CLI.hpp>

namespace evt::cli {

void add_serve_command(CLI::App& app);

}  // namespace evt::cli
