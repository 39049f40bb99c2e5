#pragma once
// Progress of long model reads and writes, reported by bytes.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace evt::model {

// Called as work advances, last with done_bytes == total_bytes; `tensor` is the one in hand.
using ProgressFn = std::function<void(uint64_t done_bytes, uint64_t total_bytes, std::string_view tensor)>;

// Prints to stderr: one line redrawn in place when stderr is a terminal, otherwise a line at
// each quarter so that logs stay short. `label` starts every line ("loading", "writing").
ProgressFn terminal_progress(std::string label);

}  // namespace evt::model
