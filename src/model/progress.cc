#include "model/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace evt::model {

namespace {

std::string bytes_str(uint64_t bytes) {
  return bytes >= (1ull << 30) ? fmt::format("{:.2f} GiB", bytes / double(1ull << 30))
                               : fmt::format("{:.1f} MiB", bytes / double(1ull << 20));
}

struct TerminalProgress {
  using Clock = std::chrono::steady_clock;
  std::string label;
  bool tty = ::isatty(::fileno(stderr)) != 0;
  Clock::time_point start = Clock::now();
  Clock::time_point last_draw{};
  int last_quarter = -1;

  void operator()(uint64_t done, uint64_t total, std::string_view tensor) {
    const Clock::time_point now = Clock::now();
    const bool finished = done >= total;
    const double fraction = total == 0 ? 1.0 : double(done) / double(total);
    if (finished) {
      const double seconds = std::chrono::duration<double>(now - start).count();
      fmt::print(stderr, "{}{}: done, {} in {:.1f} s\n", tty ? "\r\033[K" : "", label, bytes_str(total), seconds);
      return;
    }
    if (tty) {
      // Redrawing at every chunk would cost more than the work on a fast disk.
      if (now - last_draw < std::chrono::milliseconds(100)) return;
      last_draw = now;
      fmt::print(stderr, "\r\033[K{}: {:3.0f}% ({} of {}) {}", label, 100 * fraction, bytes_str(done),
                 bytes_str(total), tensor);
      std::fflush(stderr);
      return;
    }
    const int quarter = static_cast<int>(fraction * 4);
    if (quarter == last_quarter) return;
    last_quarter = quarter;
    fmt::print(stderr, "{}: {:3.0f}% ({} of {})\n", label, 100 * fraction, bytes_str(done), bytes_str(total));
  }
};

}  // namespace

ProgressFn terminal_progress(std::string label) {
  auto state = std::make_shared<TerminalProgress>();
  state->label = std::move(label);
  return [state](uint64_t done, uint64_t total, std::string_view tensor) { (*state)(done, total, tensor); };
}

}  // namespace evt::model
