#pragma once
// The internal-invariant tier: EVT_CHECK(cond) << "context" aborts with file:line when a
// condition that no input should be able to break does break. User errors use Status instead.

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace evt::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": internal error: check failed: " << condition << ": ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace evt::detail

#define EVT_CHECK(cond) \
  if (cond) {           \
  } else                \
    ::evt::detail::CheckFailure(__FILE__, __LINE__, #cond)
