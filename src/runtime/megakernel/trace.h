#pragma once
// Per-task traces of a megakernel launch (support.h's trace buffer), written as Chrome trace
// JSON that Perfetto opens: one track per SM (worker), a slice per task with its wait inside and
// its block barriers' times as arguments.

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
  // When the task's block barriers released, in order (the first ones; none on the CPU, whose
  // blocks are one thread): the one that ends the wait, the body's own, the one that ends the body.
  std::vector<uint64_t> barriers_ns;
  // Between this task and the one before it on the worker: the last block barrier before the
  // start (the inline queue's hand-out; 0 when none), and when the leader had written this task's
  // record, past its end.
  uint64_t handout_ns = 0, recorded_ns = 0;
};

// The tasks of one group in one layer of a traced launch (layer -1: a group that is not
// layered): from the first one's start to the last one's end, and how many ran (a skipped task,
// one a range trigger did not release, is not traced).
struct StageSpan {
  int group = 0;
  int64_t layer = -1;
  uint64_t start_ns = 0, end_ns = 0;
  int64_t tasks = 0;
};

// The spans of a trace's (group, layer) pairs, sorted by group, then layer; `layer_of(group,
// linear)` gives a task's layer or -1.
std::vector<StageSpan> stage_spans(std::span<const TraceEvent> events,
                                   const std::function<int64_t(int group, int64_t linear)>& layer_of);

// Decodes a trace buffer of `workers` x (1 + kTraceWords * tasks_per_worker) words.
std::vector<TraceEvent> decode_trace(std::span<const uint64_t> words, int workers, int64_t tasks_per_worker);

// `task_name(group, linear)` names a task, e.g. "final(3)".
Status write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                          const std::function<std::string(int group, int64_t linear)>& task_name);

}  // namespace evt::mk
