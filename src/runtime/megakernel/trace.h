#pragma once
// Per-task traces of a megakernel launch (support.h's trace buffer), written as Chrome trace
// JSON that Perfetto opens: one track per SM (worker), a slice per task with its wait inside.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace evt::mk {

struct TraceEvent {
  int worker = 0;
  int group = 0;
  int64_t linear = 0;
  uint64_t start_ns = 0, waited_ns = 0, end_ns = 0;
};

// Decodes a trace buffer of `workers` x (1 + kTraceWords * tasks_per_worker) words.
std::vector<TraceEvent> decode_trace(std::span<const uint64_t> words, int workers, int64_t tasks_per_worker);

// `task_name(group, linear)` names a task, e.g. "final(3)".
Status write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                          const std::function<std::string(int group, int64_t linear)>& task_name);

}  // namespace evt::mk
