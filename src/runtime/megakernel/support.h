#pragma once
// What every generated megakernel builds on, written once against a small worker interface that
// the CUDA backend (a thread block per SM) and the CPU backend (a thread) implement:
//
//   int id(), count()                      this worker and the number of workers
//   bool leader()                          the thread that schedules (thread 0 of a block)
//   int thread(), threads(); void sync()   this thread, the block size, a block barrier
//   T share(T v)                           the leader's v, to every thread of the block
//   uint64_t load_acquire(p), fetch_add_release(p, v); static uint64_t fetch_max(p, v)
//   void fence_release(), fence_acquire(); uint64_t fetch_add_relaxed(p, v)   a notify: fence, then adds
//   bool compare_exchange(p, expected&, desired)   relaxed; on failure, expected is what p held
//   void store_release(p, v), store_relaxed(p, v)
//   uint64_t now_ns(); void pause()        timer and spin back-off
//   Scratch scratch(); weights(stream)     the tile-body block's scratch and stream reader
//   void announce(task)                    a task's weights are next, when the loader cannot know
//                                          (CUDA's loader follows these, the host ignores them)
//   bool queue_inline(task); next_inline() the leader's list of inline tasks to run next (false when
//                                          full; -1 when empty)
//   kLoaderDecodes; post_task, take_task   whether a loader decodes the static order's tasks for
//                                          the consumers (CUDA's does; the host's worker decodes its own)
//   kPassSets                              the tile-body block's (tile_body.h): what the bodies'
//                                          projection passes may take (kernels/llm/gemv.h)
//
// Counters need no reset pass: the scheduler's memory is two arenas, and a launch uses one while
// it zeroes the other for the next launch. Nothing touches the other arena during the launch, so
// the zeroing needs no barrier, and every launch starts from zeros: a notify is one release add
// and a wait is an acquire load.

#include <cstdint>

#include "kernels/tile_body.h"

namespace evt::mk {

using kernels::DevBuffer;

// Index arithmetic of generated code: floor division, in 32 bits where both values fit (tile and
// event indices do in practice), since the GPU's 64-bit division is a subroutine call. Called, not
// inlined: generated code divides in every index map of every task, and the inlined copies were
// 11,400 of the 56,700 SASS instructions of the decode megakernel's static entry (ptxas 13.0),
// code that the instruction cache would otherwise have to hold.
EVT_HD EVT_NOINLINE inline int64_t floor_div(int64_t a, int64_t b) {
  if (a >= 0 && b > 0 && a <= INT32_MAX && b <= INT32_MAX) {
    return static_cast<int64_t>(static_cast<uint32_t>(a) / static_cast<uint32_t>(b));
  }
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
EVT_HD inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }
EVT_HD constexpr int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
EVT_HD constexpr int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }

// A task as its group and its tile's index in one word: the inline queue's entries, the loader's
// announcements and the trace's records.
EVT_HD constexpr int64_t task_id(int group, int64_t linear) { return (int64_t{group} << 40) | linear; }
EVT_HD constexpr int task_id_group(int64_t id) { return static_cast<int>(id >> 40); }
EVT_HD constexpr int64_t task_id_linear(int64_t id) { return id & ((int64_t{1} << 40) - 1); }

// An element of an integer index buffer (one index per dimension); -1 (no event) when an index
// is out of bounds, which the CPU executor reports as an error instead. Without a branch: the
// bounds only predicate the load, so that several of these in a row (a range trigger's search,
// a data-dependent edge's elements) issue their loads together instead of one after another.
template <class... I>
EVT_HD int64_t load_at(const DevBuffer& b, bool wide, I... index) {
  const int64_t idx[] = {static_cast<int64_t>(index)...};
  int64_t linear = 0;
  bool in_bounds = true;
  EVT_UNROLL
  for (int k = 0; k < static_cast<int>(sizeof...(I)); ++k) {
    in_bounds &= (idx[k] >= 0) & (idx[k] < b.shape[k]);
    linear = linear * b.shape[k] + idx[k];
  }
  if (!in_bounds) return -1;
  return wide ? b.as<const int64_t>()[linear] : b.as<const int32_t>()[linear];
}

// Inline tasks a worker can hold at once (queue_inline).
inline constexpr size_t kInlineSlots = 64;

// How a generated kernel is being run. kKernels: one launch per task group in topological order,
// as ordinary kernels; launch boundaries synchronize, so tasks neither wait nor notify.
// kPerGroup: one megakernel in which each group runs as its graph says (schedule=static|dynamic).
enum Schedule : int { kStatic = 0, kDynamic = 1, kKernels = 2, kPerGroup = 3 };

// Whether a group whose graph says `group_dynamic` runs from the ready queue under schedule s.
EVT_HD constexpr bool runs_dynamic(Schedule s, bool group_dynamic) {
  return s == kDynamic || (s == kPerGroup && group_dynamic);
}
// Whether inline groups run on the worker that completes their input (otherwise the dynamic
// schedule queues them and the kernels mode launches them).
EVT_HD constexpr bool runs_inline(Schedule s) { return s == kStatic || s == kPerGroup; }

// What a task's wait step decided. kHelp: the wait paused to run a ready dynamic task (Help).
enum Step : int { kRun = 0, kSkip = 1, kAbort = 2, kHelp = 3 };

enum class ErrorKind : int32_t {
  kNone = 0,
  kTimeout = 1,
  kOverNotified = 2,
  kQueueTimeout = 3,
  kBadRange = 4,
  kInlineOverflow = 5,
};

// Written once by the first failing worker of a launch; read by the host.
struct ErrorRecord {
  ErrorKind kind;
  int32_t worker;
  int32_t group;
  int32_t event;  // -1 when the error is not about an event
  int32_t tile_rank;
  int64_t tile[4];
  int64_t element;    // row-major within the event
  int64_t remaining;  // notifications still missing (negative: received too many)
};

// The head of an arena: the scheduler's counters for one launch, each on its own cache line
// (idle workers poll some of them while others update the rest).
struct SchedulerState {
  alignas(128) uint64_t abort;  // 1 once a worker failed
  alignas(128) uint64_t queue_tail;      // tasks pushed (dynamic)
  alignas(128) uint64_t queue_head;
  // Dynamic: tasks finished, plus (per-group) the workers through their static tasks.
  alignas(128) uint64_t finished;
  alignas(128) uint64_t range_released;  // tiles released by range triggers (dynamic)
  alignas(128) uint64_t done;            // 1 once nothing is left to run (dynamic): idle workers exit
  alignas(128) ErrorRecord error;
};

// Per-launch arguments shared by every generated kernel. Pointers are into this launch's arena.
struct LaunchArgs {
  int64_t spin_limit_ns;    // a wait longer than this aborts the launch with a time-out record
  SchedulerState* state;
  uint64_t* queue_slots;    // task + 1 per ready task; 0 is empty
  int64_t queue_capacity;   // slots: the binding's task count (each task is pushed at most once)
  uint64_t* pending;        // per task: releases received (dynamic)
  uint64_t* next_arena;     // the other arena, zeroed during this launch for the next one
  int64_t next_arena_words;
  // Tracing, off when null: per worker, a count word then kTraceWords per task (trace_task).
  uint64_t* trace;
  int64_t trace_tasks_per_worker;
  // CUDA: bytes of the blocks' scratch (dynamic shared memory) for this launch; 0 for the most
  // the kernel allows (LaunchShape). The weight ring's stages take what the scratch leaves, up
  // to a limit; the rest of the SM's 256 KiB serves as L1 cache.
  int scratch_bytes;
  // CUDA: the most stages the weight ring may take, 0 for kDefaultRingStages (shared_memory.h);
  // the launch replaces it with the stages the ring takes (cuda_launch.cuh).
  int ring_stages;
  int poll_ns;      // CUDA: the sleep between two polls of a wait, set by the launch
  int prefetch_in_flight;  // CUDA: the loader's cap on fills in flight ahead of a task (CudaWorker::load), likewise
};

// One traced task: what ran, when the leader began waiting, when the wait ended, and when the
// notifications were done (%globaltimer nanoseconds on the GPU); then when each of the task's
// first kTraceBarriers block barriers released (the one after the wait, the body's, the one
// before the notifications), as 32-bit offsets from the start plus one, two a word, 0 past the
// last. The barriers place a task's time inside its body without touching the bodies. The last
// word places the time between two tasks: the last barrier before the start (the inline queue's
// hand-out), as an offset back from the start plus one (0: none), and when the leader had
// written the record, as an offset from the end plus one.
inline constexpr int kTraceBarriers = 12;
inline constexpr int kTraceWords = 4 + kTraceBarriers / 2 + 1;

// Writes one traced task's record (the leader, after its notifications).
//
// The functions out of line here take the LaunchArgs fields they read, never the LaunchArgs: a
// reference to the kernel's parameter that reaches a call makes ptxas address the parameter
// through a generic pointer, and then every read of it in the kernel, a.trace after each block
// barrier included, is a load through the L1 rather than from the constant bank.
template <class W>
EVT_HD EVT_NOINLINE void trace_task(W& w, uint64_t* trace, int64_t tasks_per_worker, int group, int64_t linear,
                                    uint64_t start, uint64_t waited) {
  const uint64_t end = w.now_ns();  // before the bookkeeping below, whose load may miss
  uint64_t* mine = trace + static_cast<int64_t>(w.id()) * (1 + kTraceWords * tasks_per_worker);
  const uint64_t n = mine[0];
  if (static_cast<int64_t>(n) >= tasks_per_worker) {  // later tasks go untraced
    w.take_barriers([](uint64_t) {});
    return;
  }
  uint64_t* r = mine + 1 + kTraceWords * n;
  // The worker's barriers since the last traced task, two a word; of those before this one's
  // start (the inline queue's hand-out) only the last is kept, in the last word.
  int k = 0;
  uint64_t handout = 0;
  w.take_barriers([&](uint64_t t) {
    if (t < start) handout = start - t + 1;
    if (t < start || k >= kTraceBarriers) return;
    const uint64_t offset = static_cast<uint32_t>(t - start + 1);
    r[4 + k / 2] = k % 2 == 0 ? offset : r[4 + k / 2] | offset << 32;
    ++k;
  });
  for (k = (k + 1) / 2; k < kTraceBarriers / 2; ++k) r[4 + k] = 0;
  r[0] = static_cast<uint64_t>(task_id(group, linear));
  r[1] = start;
  r[2] = waited;
  r[3] = end;
  r[kTraceWords - 1] = static_cast<uint32_t>(handout) | uint64_t{static_cast<uint32_t>(w.now_ns() - end + 1)} << 32;
  mine[0] = n + 1;
}

// Every thread of every worker zeroes its share of the next launch's arena.
template <class W>
EVT_HD void zero_next_arena(W& w, const LaunchArgs& a) {
  const int64_t stride = static_cast<int64_t>(w.count()) * w.threads();
  for (int64_t i = static_cast<int64_t>(w.id()) * w.threads() + w.thread(); i < a.next_arena_words; i += stride) {
    a.next_arena[i] = 0;
  }
}

// What a block's leader announces when its consumers are done (dynamic schedules): the loader
// may leave.
inline constexpr int64_t kAnnounceStop = -1;

// One arrival (release); returns the arrivals so far.
template <class W>
EVT_HD uint64_t arrive(W& w, uint64_t* counter, uint64_t n = 1) {
  return w.fetch_add_release(counter, n) + n;
}

template <class W>
EVT_HD bool aborted(W& w, const SchedulerState* s) {
  return w.load_acquire(&s->abort) != 0;
}

// Records the launch's first error and tells every worker to stop (fail's cold part). Called, not
// inlined: every wait and notification has an error path, and inlined copies of it put cold code
// between the hot instructions the instruction cache must hold. It takes the worker's id, not the
// worker: with fail() and spin_check both out of line and given the worker, cicc 13.0 crashed at
// random (SIGSEGV, about 3 runs in 4) compiling the layered_stack megakernel.
template <class W>
EVT_HD EVT_NOINLINE void record_failure(SchedulerState* s, int worker, ErrorKind kind, int group, const int64_t* tile,
                                        int tile_rank, int event, int64_t element, int64_t remaining) {
  if (W::fetch_max(&s->abort, 1) != 0) return;  // someone else failed first
  ErrorRecord& r = s->error;
  r.kind = kind;
  r.worker = worker;
  r.group = group;
  r.event = event;
  r.tile_rank = tile_rank;
  for (int k = 0; k < tile_rank && k < 4; ++k) r.tile[k] = tile[k];
  r.element = element;
  r.remaining = remaining;
}

// Records the launch's first error and tells every worker to stop. Leader only.
template <class W>
EVT_HD void fail(W& w, const LaunchArgs& a, ErrorKind kind, int group, const int64_t* tile, int tile_rank, int event,
                 int64_t element, int64_t remaining) {
  record_failure<W>(a.state, w.id(), kind, group, tile, tile_rank, event, element, remaining);
}

// Under per-group scheduling, the leader of a static task whose wait spins runs ready tasks of the
// dynamic groups meanwhile. Without that, every worker could spin in a static wait for a dynamic
// task that no worker is free to pop.
struct Help {
  int64_t sources;      // the queue's source tickets (pop_task)
  int64_t ticket = -1;  // the ticket taken, when the wait returns kHelp
};

template <class W>
EVT_HD int64_t try_take_ticket(W& w, SchedulerState* s, int64_t sources);

// spin_until's check every 64 polls, out of line (it is rare, and spin_until is inlined into
// every wait): kAbort if the launch aborted, kTimedOut past the spin limit since `start`, kHelp
// when `help` took a ready task, else kRun.
inline constexpr int kTimedOut = -1;
template <class W>
EVT_HD EVT_NOINLINE int spin_check(W& w, SchedulerState* s, int64_t spin_limit_ns, Help* help, uint64_t start) {
  if (aborted(w, s)) return kAbort;
  if (static_cast<int64_t>(w.now_ns() - start) > spin_limit_ns) return kTimedOut;
  if (help && (help->ticket = try_take_ticket(w, s, help->sources)) >= 0) return kHelp;
  return kRun;
}

// Polls until `ready()` holds. Leader only. kAbort when the launch aborted or the wait timed out
// (`timed_out()` records which wait); kHelp when `help` took a ready task first. Polls pause:
// without the pause a hop between two SMs measured 40 ns faster in bench/micro/sync_micro.cu,
// but hops100 in the megakernel measured no faster.
template <class W, class Ready, class TimedOut>
EVT_HD int spin_until(W& w, const LaunchArgs& a, Help* help, Ready&& ready, TimedOut&& timed_out) {
  uint64_t start = 0;
  uint32_t spins = 0;
  while (!ready()) {
    if (start == 0) start = w.now_ns();
    w.pause();
    if ((++spins & 63) != 0) continue;
    const int step = spin_check(w, a.state, a.spin_limit_ns, help, start);
    if (step == kTimedOut) {
      timed_out();
      return kAbort;
    }
    if (step != kRun) return step;
  }
  return kRun;
}

// Spins until `counter` holds `target` arrivals (a Step, as spin_until).
template <class W>
EVT_HD int wait_arrivals(W& w, const LaunchArgs& a, const uint64_t* counter, uint64_t target, int group,
                         const int64_t* tile, int tile_rank, int event, int64_t element, Help* help) {
  if (target == 0) return kRun;
  uint64_t got = 0;
  const int step = spin_until(w, a, help, [&] { return (got = w.load_acquire(counter)) >= target; }, [&] {
    fail(w, a, ErrorKind::kTimeout, group, tile, tile_rank, event, element, static_cast<int64_t>(target - got));
  });
  if (step != kRun) return step;
  // Static notifiers do not read the counter back, so the waiter catches a count set too low.
  if (got > target) {
    fail(w, a, ErrorKind::kOverNotified, group, tile, tile_rank, event, element,
         static_cast<int64_t>(target) - static_cast<int64_t>(got));
    return kAbort;
  }
  return kRun;
}

// A run-time wait count, once its setter stored it (as count + 1: 0 means unset). A Step, as
// spin_until.
template <class W>
EVT_HD int wait_runtime_target(W& w, const LaunchArgs& a, const uint64_t* target, uint64_t* count, int group,
                               const int64_t* tile, int tile_rank, int event, int64_t element, Help* help) {
  uint64_t v = 0;
  const int step = spin_until(w, a, help, [&] { return (v = w.load_acquire(target)) != 0; },
                              [&] { fail(w, a, ErrorKind::kTimeout, group, tile, tile_rank, event, element, -1); });
  if (step == kRun) *count = v - 1;
  return step;
}

// --- the dynamic scheduler's ready queue: tickets over [source tasks..., pushed tasks...]

// Pushes n tasks, task_at(0 .. n-1), with one reservation. The tail (the count of pushed tasks)
// rises before any slot is visible, so no worker sees the launch as over while a task waits.
template <class W, class TaskAt>
EVT_HD void push_tasks(W& w, const LaunchArgs& a, int64_t n, TaskAt&& task_at) {
  if (n <= 0) return;
  const uint64_t first = arrive(w, &a.state->queue_tail, static_cast<uint64_t>(n)) - n;
  w.store_release(&a.queue_slots[first], static_cast<uint64_t>(task_at(0)) + 1);  // fences the rest too
  for (int64_t k = 1; k < n; ++k) w.store_relaxed(&a.queue_slots[first + k], static_cast<uint64_t>(task_at(k)) + 1);
}

// Puts n tasks, task_at(0 .. n-1) (each a task_id), on the leader's list of inline tasks, which
// its block runs after the task that released them.
template <class W, class TaskAt>
EVT_HD void queue_inline(W& w, const LaunchArgs& a, int64_t n, TaskAt&& task_at) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t task = task_at(k);
    if (!w.queue_inline(task)) {
      fail(w, a, ErrorKind::kInlineOverflow, task_id_group(task), nullptr, 0, -1, task_id_linear(task), n);
      return;
    }
  }
}

template <class W>
EVT_HD void push_task(W& w, const LaunchArgs& a, int64_t task) {
  push_tasks(w, a, 1, [task](int64_t) { return task; });
}

// Whether `finished` counts every source, pushed task and static worker (see count_finished).
template <class W>
EVT_HD bool all_finished(W& w, const LaunchArgs& a, uint64_t finished, int64_t sources, int64_t static_workers) {
  return finished == static_cast<uint64_t>(sources + static_workers) + w.load_acquire(&a.state->queue_tail);
}

// A ticket whose task is ready or being pushed, or -1 when none is: never waits.
template <class W>
EVT_HD int64_t try_take_ticket(W& w, SchedulerState* s, int64_t sources) {
  uint64_t head = w.load_acquire(&s->queue_head);
  const uint64_t limit = static_cast<uint64_t>(sources) + w.load_acquire(&s->queue_tail);
  while (head < limit) {
    if (w.compare_exchange(&s->queue_head, head, head + 1)) return static_cast<int64_t>(head);
  }
  return -1;
}

// The task of a ticket once it is pushed, or -1 when the launch ends first.
template <class W, class SourceTask>
EVT_HD int64_t ticket_task(W& w, const LaunchArgs& a, int64_t sources, int64_t static_workers, int64_t ticket,
                           SourceTask&& source_task) {
  if (ticket < sources) return source_task(ticket);
  // Tickets past the last slot (workers outnumber the tasks left) only wait for the end.
  const uint64_t* slot = ticket - sources < a.queue_capacity ? &a.queue_slots[ticket - sources] : nullptr;
  const uint64_t start = w.now_ns();
  uint32_t spins = 0;
  while (true) {
    const uint64_t v = slot ? w.load_acquire(slot) : 0;
    if (v != 0) return static_cast<int64_t>(v) - 1;
    w.pause();
    if ((++spins & 3) != 0) continue;
    // Idle workers poll these once-written flags, not the counters every push and count updates.
    if (w.load_acquire(&a.state->done) != 0 || aborted(w, a.state)) return -1;
    if ((spins & 1023) != 0) continue;
    // A launch with nothing to count ends here: no task sets the flag.
    if (all_finished(w, a, w.load_acquire(&a.state->finished), sources, static_workers)) return -1;
    if (static_cast<int64_t>(w.now_ns() - start) > a.spin_limit_ns) {
      fail(w, a, ErrorKind::kQueueTimeout, -1, nullptr, 0, -1, ticket, 0);
      return -1;
    }
  }
}

// Counts one finished task, or one worker through its static tasks (per-group scheduling). The
// count that reaches every source, pushed task and static worker ends the launch. It cannot come
// early: a task still running is a source or was pushed, by a task that either finished (its
// count, acquired here, makes the push visible) or is still running itself, and so on back to
// a source or a static worker that has not counted yet.
template <class W>
EVT_HD void count_finished(W& w, const LaunchArgs& a, int64_t sources, int64_t static_workers) {
  if (all_finished(w, a, arrive(w, &a.state->finished), sources, static_workers)) w.store_release(&a.state->done, 1);
}

// The next task for this worker, or -1 when the launch is over (or aborted). Leader only.
// Tickets below `sources` stand for the source tasks (those awaiting nothing), which need no
// push: `source_task(ticket)` names them. The launch is over once every source and pushed task
// finished and `static_workers` workers are through their static tasks (which may push more).
template <class W, class SourceTask>
EVT_HD int64_t pop_task(W& w, const LaunchArgs& a, int64_t sources, int64_t static_workers, SourceTask&& source_task) {
  return ticket_task(w, a, sources, static_workers, static_cast<int64_t>(arrive(w, &a.state->queue_head)) - 1,
                     source_task);
}

}  // namespace evt::mk
