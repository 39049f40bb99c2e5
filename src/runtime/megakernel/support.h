#pragma once
// What every generated megakernel builds on, written once against a small worker interface that
// the CUDA backend (a thread block per SM) and the CPU backend (a thread) implement:
//
//   int id(), count()                      this worker and the number of workers
//   bool leader()                          the thread that schedules (thread 0 of a block)
//   void sync()                            block barrier
//   T share(T v)                           the leader's v, to every thread of the block
//   uint64_t load_acquire(p), fetch_add_release(p, v), fetch_max(p, v)
//   void store_release(p, v)
//   uint64_t now_ns(); void pause()        timer and spin back-off
//
// Counters are epoch-tagged: the high 32 bits hold the launch's epoch and the low 32 bits the
// arrivals in that launch. A notifier first raises the counter to (epoch << 32) with fetch_max,
// which resets a counter left by an earlier launch, then adds one. So counters work across
// launches, for any binding, with no reset pass.

#include <cstdint>

#include "kernels/tile_body.h"

namespace evt::mk {

using kernels::DevBuffer;

EVT_HD constexpr uint64_t epoch_tag(uint32_t epoch) { return static_cast<uint64_t>(epoch) << 32; }
// Arrivals recorded in `value` during `epoch` (0 if the value is from an earlier launch).
EVT_HD constexpr uint32_t arrivals_in(uint64_t value, uint32_t epoch) {
  return (value >> 32) == epoch ? static_cast<uint32_t>(value) : 0u;
}

EVT_HD constexpr int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
EVT_HD constexpr int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }
EVT_HD constexpr int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
EVT_HD constexpr int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }

// An element of an integer index buffer; -1 (no event) when the index is out of bounds, which
// the CPU executor reports as an error instead.
EVT_HD inline int64_t load_index(const DevBuffer& b, const int64_t* index, bool wide) {
  int64_t linear = 0;
  for (int k = 0; k < b.rank; ++k) {
    if (index[k] < 0 || index[k] >= b.shape[k]) return -1;
    linear = linear * b.shape[k] + index[k];
  }
  return wide ? b.as<const int64_t>()[linear] : b.as<const int32_t>()[linear];
}

template <class... I>
EVT_HD int64_t load_at(const DevBuffer& b, bool wide, I... index) {
  const int64_t idx[] = {static_cast<int64_t>(index)...};
  return load_index(b, idx, wide);
}

// How a generated kernel is being run. kKernels: one launch per task group in topological order,
// as ordinary kernels; launch boundaries synchronize, so tasks neither wait nor notify.
enum Schedule : int { kStatic = 0, kDynamic = 1, kKernels = 2 };

// What a task's wait step decided.
enum Step : int { kRun = 0, kSkip = 1, kAbort = 2 };

enum class ErrorKind : int32_t { kNone = 0, kTimeout = 1, kOverNotified = 2, kQueueTimeout = 3, kBadRange = 4 };

// Written once by the first failing worker of a launch; read by the host.
struct ErrorRecord {
  uint32_t epoch;
  ErrorKind kind;
  int32_t worker;
  int32_t group;
  int32_t event;  // -1 when the error is not about an event
  int32_t tile_rank;
  int64_t tile[4];
  int64_t element;    // row-major within the event
  int64_t remaining;  // notifications still missing (negative: received too many)
};

// Device-memory state of the scheduler, kept across launches.
struct SchedulerState {
  uint64_t abort;           // epoch_tag(epoch) | 1 once a worker failed in this launch
  uint64_t queue_tail;      // tagged ticket counters of the ready queue
  uint64_t queue_head;
  uint64_t pushed;          // tagged: tasks pushed this launch
  uint64_t finished;        // tagged: tasks finished this launch (dynamic)
  uint64_t range_released;  // tagged: tiles released by range triggers this launch (dynamic)
  ErrorRecord error;
};

// Per-launch arguments shared by every generated kernel.
struct LaunchArgs {
  uint32_t epoch;
  int64_t spin_limit_ns;    // a wait longer than this aborts the launch with a time-out record
  SchedulerState* state;
  uint64_t* queue_slots;    // capacity: the binding's task count
  uint64_t* pending;        // per task: releases received (dynamic), tagged
};

// Adds `n` arrivals for this launch; returns the arrivals after them.
template <class W>
EVT_HD uint32_t tagged_add(W& w, uint64_t* counter, uint32_t epoch, uint32_t n = 1) {
  w.fetch_max(counter, epoch_tag(epoch));
  return static_cast<uint32_t>(w.fetch_add_release(counter, n) - epoch_tag(epoch)) + n;
}

template <class W>
EVT_HD bool aborted(W& w, const LaunchArgs& a) {
  return w.load_acquire(&a.state->abort) == (epoch_tag(a.epoch) | 1);
}

// Records the launch's first error and tells every worker to stop. Leader only.
template <class W>
EVT_HD void fail(W& w, const LaunchArgs& a, ErrorKind kind, int group, const int64_t* tile, int tile_rank, int event,
                 int64_t element, int64_t remaining) {
  const uint64_t mine = epoch_tag(a.epoch) | 1;
  if (w.fetch_max(&a.state->abort, mine) == mine) return;  // someone else failed first
  ErrorRecord& r = a.state->error;
  r.epoch = a.epoch;
  r.kind = kind;
  r.worker = w.id();
  r.group = group;
  r.event = event;
  r.tile_rank = tile_rank;
  for (int k = 0; k < tile_rank && k < 4; ++k) r.tile[k] = tile[k];
  r.element = element;
  r.remaining = remaining;
}

// Spins until `counter` holds `target` arrivals for this launch. Leader only. False when the
// launch aborted or the wait timed out (which aborts it).
template <class W>
EVT_HD bool wait_arrivals(W& w, const LaunchArgs& a, const uint64_t* counter, uint32_t target, int group,
                          const int64_t* tile, int tile_rank, int event, int64_t element) {
  if (target == 0 || arrivals_in(w.load_acquire(counter), a.epoch) >= target) return true;
  const uint64_t start = w.now_ns();
  uint32_t spins = 0;
  while (arrivals_in(w.load_acquire(counter), a.epoch) < target) {
    w.pause();
    if ((++spins & 63) != 0) continue;
    if (aborted(w, a)) return false;
    if (static_cast<int64_t>(w.now_ns() - start) > a.spin_limit_ns) {
      const uint32_t got = arrivals_in(w.load_acquire(counter), a.epoch);
      fail(w, a, ErrorKind::kTimeout, group, tile, tile_rank, event, element, int64_t{target} - got);
      return false;
    }
  }
  return true;
}

// A run-time wait count, once its setter stored it for this launch.
template <class W>
EVT_HD bool wait_runtime_target(W& w, const LaunchArgs& a, const uint64_t* target, uint32_t* count, int group,
                                const int64_t* tile, int tile_rank, int event, int64_t element) {
  const uint64_t start = w.now_ns();
  uint32_t spins = 0;
  uint64_t v;
  while (((v = w.load_acquire(target)) >> 32) != a.epoch) {
    w.pause();
    if ((++spins & 63) != 0) continue;
    if (aborted(w, a)) return false;
    if (static_cast<int64_t>(w.now_ns() - start) > a.spin_limit_ns) {
      fail(w, a, ErrorKind::kTimeout, group, tile, tile_rank, event, element, -1);
      return false;
    }
  }
  *count = static_cast<uint32_t>(v);
  return true;
}

// --- the dynamic scheduler's ready queue: tickets over [source tasks..., pushed tasks...]

template <class W>
EVT_HD void push_task(W& w, const LaunchArgs& a, int64_t task) {
  const uint32_t index = tagged_add(w, &a.state->queue_tail, a.epoch) - 1;
  tagged_add(w, &a.state->pushed, a.epoch);
  w.store_release(&a.queue_slots[index], epoch_tag(a.epoch) | static_cast<uint64_t>(task));
}

// The next task for this worker, or -1 when the launch is over (or aborted). Leader only.
// Tickets below `sources` stand for the source tasks (those awaiting nothing), which need no
// push: `source_task(ticket)` names them.
template <class W, class SourceTask>
EVT_HD int64_t pop_task(W& w, const LaunchArgs& a, int64_t sources, SourceTask&& source_task) {
  const int64_t ticket = tagged_add(w, &a.state->queue_head, a.epoch) - 1;
  if (ticket < sources) return source_task(ticket);
  const uint64_t* slot = &a.queue_slots[ticket - sources];
  const uint64_t start = w.now_ns();
  uint32_t spins = 0;
  while (true) {
    const uint64_t v = w.load_acquire(slot);
    if ((v >> 32) == a.epoch) return static_cast<int64_t>(static_cast<uint32_t>(v));
    // Over when every source and pushed task has finished: nothing is left to push anything.
    const uint32_t finished = arrivals_in(w.load_acquire(&a.state->finished), a.epoch);
    const uint32_t pushed = arrivals_in(w.load_acquire(&a.state->pushed), a.epoch);
    if (finished == sources + pushed) return -1;
    w.pause();
    if ((++spins & 63) != 0) continue;
    if (aborted(w, a)) return -1;
    if (static_cast<int64_t>(w.now_ns() - start) > a.spin_limit_ns) {
      fail(w, a, ErrorKind::kQueueTimeout, -1, nullptr, 0, -1, ticket, 0);
      return -1;
    }
  }
}

}  // namespace evt::mk
