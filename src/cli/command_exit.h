#pragma once
// How a subcommand ends on an error: the message on stderr, then CLI::RuntimeError carrying the
// exit code main() returns. Exit codes: 0 success, 1 the command failed, 2 bad command line.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <string>

namespace evt::cli {

inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;

[[noreturn]] inline void fail(int code, const std::string& message) {
  fmt::print(stderr, "error: {}\n", message);
  throw CLI::RuntimeError(code);
}

}  // namespace evt::cli
