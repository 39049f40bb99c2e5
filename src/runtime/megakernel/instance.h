#pragma once
// Host side of a generated megakernel `MK` (the generated Megakernel struct): kernel parameters
// for a binding, the scheduler's memory, and the error record turned into a message with names.
// Per-binding work is O(events): shapes and counter sizes come from generated arithmetic, and
// counters are never reset between launches (each launch has its own epoch).

#include <fmt/format.h>

#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/megakernel/cpu_worker.h"
#include "runtime/megakernel/support.h"
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

inline const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::kTimeout: return "wait timed out";
    case ErrorKind::kOverNotified: return "more notifications than the wait count";
    case ErrorKind::kQueueTimeout: return "no ready task arrived in time";
    case ErrorKind::kBadRange: return "a data-dependent index is out of range";
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

// After a dynamic launch that did not abort: every task that should have run did. Tasks of
// range-triggered groups run only where a range released them; every other task must run.
// `counters` reads an event's counters (host copies for the CUDA backend). Names the first
// element that never fired when tasks are missing.
template <class MK, class ReadCounters>
Status check_dynamic_completion(const ParamsOf<MK>& p, const SchedulerState& s, uint32_t epoch,
                                ReadCounters&& counters) {
  int64_t expected = arrivals_in(s.range_released, epoch);
  for (int g = 0; g < MK::num_groups; ++g) {
    if (!MK::range_triggered(g)) expected += MK::tiles(p, g);
  }
  const int64_t finished = arrivals_in(s.finished, epoch);
  if (finished == expected) return Status();
  std::string msg = fmt::format("megakernel failed: the dynamic launch ended with {} of {} tasks run", finished, expected);
  for (int e = 0; e < MK::num_events; ++e) {
    const int64_t target = MK::target(p, e);
    if (target <= 0) continue;
    const std::vector<uint64_t> c = counters(e);
    for (int64_t x = 0; x < static_cast<int64_t>(c.size()); ++x) {
      const int64_t got = arrivals_in(c[x], epoch);
      if (got < target) {
        return Status::error(msg + fmt::format("; event {} element {} received {} of {} notifications", MK::event_name(e),
                                               x, got, target));
      }
    }
  }
  return Status::error(msg);
}

// Sizes of the scheduler's memory for one binding.
template <class MK>
struct Footprint {
  std::vector<int64_t> elements;  // per event
  int64_t tasks = 0;

  explicit Footprint(const ParamsOf<MK>& p) : tasks(MK::tasks(p)) {
    for (int e = 0; e < MK::num_events; ++e) elements.push_back(MK::elements(p, e));
  }
};

// A generated megakernel run on CPU threads: the CPU backend CI tests the generated code with.
template <class MK>
class CpuMegakernel {
 public:
  struct Options {
    int workers = 4;
    Schedule schedule = kStatic;
    int64_t spin_limit_ns = 2'000'000'000;
  };

  Status run(ParamsOf<MK> p, const Options& o) {
    if (o.schedule == kDynamic && !MK::dynamic_supported) return error("this megakernel has no dynamic schedule");
    if (o.workers < 1) return error("need at least one worker, got {}", o.workers);
    const Footprint<MK> f(p);
    grow(f);
    for (int e = 0; e < MK::num_events; ++e) {
      p.counters[e] = counters_[e].data();
      p.targets[e] = MK::runtime_count(e) ? targets_[e].data() : nullptr;
    }
    const LaunchArgs a{++epoch_, o.spin_limit_ns, &state_, slots_.data(), pending_.data()};
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
      for (int k = 0; k < MK::num_groups; ++k) {
        launch([&](CpuWorker& w) { MK::run_one_group(w, p, a, MK::launch_order(k)); });
      }
    } else {
      launch([&](CpuWorker& w) { MK::run(w, p, a, o.schedule == kDynamic); });
    }
    if (state_.abort == (epoch_tag(epoch_) | 1)) return Status::error(describe_failure<MK>(state_.error));
    if (o.schedule != kDynamic) return Status();
    return check_dynamic_completion<MK>(p, state_, epoch_, [&](int e) {
      return std::vector<uint64_t>(counters_[e].begin(), counters_[e].begin() + f.elements[e]);
    });
  }

 private:
  // Memory only grows; new words are zero, which no epoch (they start at 1) reads as current.
  void grow(const Footprint<MK>& f) {
    counters_.resize(MK::num_events);
    targets_.resize(MK::num_events);
    for (int e = 0; e < MK::num_events; ++e) {
      const size_t n = static_cast<size_t>(std::max<int64_t>(f.elements[e], 1));
      if (counters_[e].size() < n) counters_[e].resize(n, 0);
      if (MK::runtime_count(e) && targets_[e].size() < n) targets_[e].resize(n, 0);
    }
    const size_t tasks = static_cast<size_t>(std::max<int64_t>(f.tasks, 1));
    if (pending_.size() < tasks) pending_.resize(tasks, 0);
    if (slots_.size() < tasks) slots_.resize(tasks, 0);
  }

  std::vector<std::vector<uint64_t>> counters_, targets_;
  std::vector<uint64_t> pending_, slots_;
  SchedulerState state_{};
  uint32_t epoch_ = 0;
};

}  // namespace evt::mk
