#pragma once
// The source tree the tests read inputs from: EVT_SOURCE_DIR in the environment (a GPU machine
// runs binaries built elsewhere), else the one the tests were built from.

#include <cstdlib>
#include <string>

namespace evt::testing {

inline std::string source_dir() {
  const char* env = std::getenv("EVT_SOURCE_DIR");
  return env ? env : EVT_SOURCE_DIR;
}

}  // namespace evt::testing
