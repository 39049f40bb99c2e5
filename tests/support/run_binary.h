#pragma once
// Runs the eventide binary (EVT_BINARY, set by the test's CMake target) the way a user does, for
// the end-to-end tests of its exit codes and messages.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace evt::testing {

struct CliResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

inline CliResult run_eventide(const std::string& args) {
  const std::string cmd = std::string(EVT_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace evt::testing
