#pragma once
// Host side of a generated megakernel `MK` (the generated Megakernel struct): kernel parameters
// for a binding, the scheduler's memory, and the error record turned into a message with names.
// Per-binding work is O(events): shapes and counter sizes come from generated arithmetic, and
// counters need no reset pass (support.h: a launch zeroes the other arena for the next one).

#include <fmt/format.h>

#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/megakernel/cpu_worker.h"
#include "runtime/megakernel/support.h"
#include "runtime/megakernel/trace.h"
#include "util/status.h"

namespace evt::mk {

template <class MK>
using ParamsOf = typename MK::ParamsType;

// Dims in the graph's order; one data pointer per buffer in the graph's order.
template <class MK>
Expected<ParamsOf<MK>> make_params(std::span<const int64_t> dims, std::span<void* const> buffers) {
  if (static_cast<int>(dims.size()) != MK::num_dims) {
    return error("the megakernel takes {} dims, got {}", MK::num_dims, dims.size());
  }
  if (static_cast<int>(buffers.size()) != MK::num_buffers) {
    return error("the megakernel takes {} buffers, got {}", MK::num_buffers, buffers.size());
  }
  ParamsOf<MK> p{};
  for (int d = 0; d < MK::num_dims; ++d) {
    if (dims[d] < 0) return error("dim {} is {}", MK::dim_name(d), dims[d]);
    p.dims[d] = dims[d];
  }
  MK::shapes(p);
  for (int b = 0; b < MK::num_buffers; ++b) p.buffers[b].data = buffers[b];
  return p;
}

// The schedule options every backend checks before a launch.
template <class MK>
Status check_schedule(Schedule schedule, bool early_push) {
  if (schedule == kDynamic && !MK::dynamic_supported) return error("this megakernel has no dynamic schedule");
  if (early_push && schedule != kDynamic && schedule != kPerGroup) {
    return error("early push needs a dynamic schedule (dynamic or per-group)");
  }
  return Status();
}

inline const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::kTimeout: return "wait timed out";
    case ErrorKind::kOverNotified: return "more notifications than the wait count";
    case ErrorKind::kQueueTimeout: return "no ready task arrived in time";
    case ErrorKind::kBadRange: return "a data-dependent index is out of range";
    case ErrorKind::kInlineOverflow: return "more inline tasks released at once than a worker holds";
    default: return "unknown error";
  }
}

// "megakernel failed: wait timed out: worker 3, final(2), event E element 2: 1 notification missing"
template <class MK>
std::string describe_failure(const ErrorRecord& r) {
  std::string s = fmt::format("megakernel failed: {}: worker {}", error_kind_name(r.kind), r.worker);
  if (r.group >= 0) {
    s += fmt::format(", task {}(", MK::group_name(r.group));
    for (int k = 0; k < r.tile_rank && k < 4; ++k) s += fmt::format("{}{}", k ? ", " : "", r.tile[k]);
    s += ")";
  }
  if (r.event >= 0) s += fmt::format(", event {} element {}", MK::event_name(r.event), r.element);
  if (r.kind == ErrorKind::kTimeout && r.remaining > 0) s += fmt::format(": {} notifications missing", r.remaining);
  if (r.kind == ErrorKind::kTimeout && r.remaining < 0) s += ": its run-time wait count was never set";
  if (r.kind == ErrorKind::kOverNotified) s += fmt::format(": {} too many", -r.remaining);
  if (r.kind == ErrorKind::kQueueTimeout) s += fmt::format(" (queue ticket {})", r.element);
  return s;
}

// After a launch that did not abort: every task of the ready queue's groups that should have run
// did (static tasks cannot be skipped). Tasks of range-triggered groups run only where a range
// released them; every other task must run. `counters` reads an event's counters (host copies
// for the CUDA backend). Names the first element that never fired when tasks are missing.
template <class MK, class ReadCounters>
Status check_dynamic_completion(const ParamsOf<MK>& p, Schedule schedule, int workers, const SchedulerState& s,
                                ReadCounters&& counters) {
  if (schedule != kDynamic && schedule != kPerGroup) return Status();
  int64_t expected = static_cast<int64_t>(s.range_released);
  for (int g = 0; g < MK::num_groups; ++g) {
    if (runs_dynamic(schedule, MK::dynamic_group(g)) && !MK::range_triggered(g)) expected += MK::tiles(p, g);
  }
  // Under per-group scheduling each worker also counted itself through its static tasks.
  const int64_t finished = static_cast<int64_t>(s.finished) - (schedule == kPerGroup ? workers : 0);
  if (finished == expected) return Status();
  std::string msg = fmt::format("megakernel failed: the dynamic launch ended with {} of {} tasks run", finished, expected);
  for (int e = 0; e < MK::num_events; ++e) {
    const int64_t target = MK::target(p, e);
    if (target <= 0) continue;
    const std::vector<uint64_t> c = counters(e);
    for (int64_t x = 0; x < static_cast<int64_t>(c.size()); ++x) {
      const int64_t got = static_cast<int64_t>(c[x]);
      if (got < target) {
        return Status::error(msg + fmt::format("; event {} element {} received {} of {} notifications", MK::event_name(e),
                                               x, got, target));
      }
    }
  }
  return Status::error(msg);
}

// The scheduler's memory for one binding, as word offsets into an arena:
// [SchedulerState | counters per event | run-time targets per event | producers started per
//  early-pushable event | pending | queue slots].
template <class MK>
struct Footprint {
  std::vector<int64_t> elements;  // per event
  int64_t tasks = 0;
  // Offsets per event. targets: -1 if not run-time; started: -1 if not early-pushable.
  std::vector<int64_t> counters, targets, started;
  int64_t pending = 0, slots = 0, words = 0;

  explicit Footprint(const ParamsOf<MK>& p) : tasks(MK::tasks(p)) {
    int64_t at = (sizeof(SchedulerState) + 7) / 8;
    for (int e = 0; e < MK::num_events; ++e) {
      elements.push_back(MK::elements(p, e));
      counters.push_back(at);
      at += elements.back();
    }
    for (int e = 0; e < MK::num_events; ++e) {
      targets.push_back(MK::runtime_count(e) ? at : -1);
      if (MK::runtime_count(e)) at += elements[e];
    }
    for (int e = 0; e < MK::num_events; ++e) {
      started.push_back(MK::early_pushable(e) ? at : -1);
      if (MK::early_pushable(e)) at += elements[e];
    }
    pending = at;
    slots = pending + tasks;
    words = slots + tasks;
  }

  // Points `p` and the launch arguments into `arena`; `next` (of `next_words`) gets zeroed.
  LaunchArgs bind(ParamsOf<MK>& p, uint64_t* arena, uint64_t* next, int64_t next_words, int64_t spin_limit_ns,
                  bool early_push) const {
    for (int e = 0; e < MK::num_events; ++e) {
      p.counters[e] = arena + counters[e];
      p.targets[e] = targets[e] >= 0 ? arena + targets[e] : nullptr;
      p.started[e] = early_push && started[e] >= 0 ? arena + started[e] : nullptr;
    }
    return LaunchArgs{spin_limit_ns, reinterpret_cast<SchedulerState*>(arena), arena + slots, tasks, arena + pending,
                      next, next_words};
  }
};

// A generated megakernel run on CPU threads: the CPU backend CI tests the generated code with.
template <class MK>
class CpuMegakernel {
 public:
  struct Options {
    int workers = 4;
    Schedule schedule = kStatic;
    // Dynamic schedules: push consumers once their producers start rather than finish.
    bool early_push = false;
    int64_t spin_limit_ns = 2'000'000'000;
    bool trace = false;  // record every task (last_trace())
  };

  // The tasks of the last launch run with Options::trace.
  const std::vector<TraceEvent>& last_trace() const { return trace_; }

  Status run(ParamsOf<MK> p, const Options& o) {
    EVT_RETURN_IF_ERROR(check_schedule<MK>(o.schedule, o.early_push));
    if (o.workers < 1) return error("need at least one worker, got {}", o.workers);
    MK::views(p);
    const Footprint<MK> f(p);
    // Both arenas hold any binding seen so far; growing zeroes them, as a finished launch would.
    if (words_ < f.words) {
      for (auto& arena : arenas_) arena.assign(f.words + kAlignWords, 0);
      words_ = f.words;
    }
    uint64_t* live = aligned(arenas_[launches_ % 2]);
    uint64_t* next = aligned(arenas_[(launches_ + 1) % 2]);
    ++launches_;
    LaunchArgs a = f.bind(p, live, next, words_, o.spin_limit_ns, o.early_push);
    std::vector<uint64_t> trace_words;
    if (o.trace) {
      trace_words.assign(static_cast<size_t>(o.workers * (1 + kTraceWords * f.tasks)), 0);
      a.trace = trace_words.data();
      a.trace_tasks_per_worker = f.tasks;
    }
    // Workers run `fn`; joining them is the launch boundary.
    auto launch = [&](auto&& fn) {
      std::vector<std::thread> threads;
      for (int w = 0; w < o.workers; ++w) {
        threads.emplace_back([&, w] {
          CpuWorker worker(w, o.workers);
          fn(worker);
        });
      }
      for (auto& t : threads) t.join();
    };
    if (o.schedule == kKernels) {
      for (int64_t k = 0; k < MK::launches(p); ++k) {
        launch([&](CpuWorker& w) { MK::run_one_launch(w, p, a, k); });
      }
    } else {
      launch([&](CpuWorker& w) {
        switch (o.schedule) {
          case kDynamic: return MK::template run<CpuWorker, kDynamic>(w, p, a);
          case kPerGroup: return MK::template run<CpuWorker, kPerGroup>(w, p, a);
          default: return MK::template run<CpuWorker, kStatic>(w, p, a);
        }
      });
    }
    trace_ = o.trace ? decode_trace(trace_words, o.workers, f.tasks) : std::vector<TraceEvent>{};
    if (a.state->abort != 0) return Status::error(describe_failure<MK>(a.state->error));
    return check_dynamic_completion<MK>(p, o.schedule, o.workers, *a.state, [&](int e) {
      return std::vector<uint64_t>(p.counters[e], p.counters[e] + f.elements[e]);
    });
  }

 private:
  // SchedulerState keeps its counters on separate 128-byte lines.
  static constexpr int64_t kAlignWords = 16;
  static uint64_t* aligned(std::vector<uint64_t>& v) {
    const auto address = reinterpret_cast<uintptr_t>(v.data());
    return reinterpret_cast<uint64_t*>((address + 127) & ~uintptr_t{127});
  }

  std::vector<uint64_t> arenas_[2];
  int64_t words_ = 0;
  uint64_t launches_ = 0;
  std::vector<TraceEvent> trace_;
};

}  // namespace evt::mk
