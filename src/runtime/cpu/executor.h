#pragma once
// The CPU executor: runs an instantiated graph on N worker threads that stand in for SMs. It
// defines what the IR means; every other backend is checked against it.

#include <chrono>
#include <cstdint>
#include <optional>

#include "ir/tile_graph.h"
#include "kernels/registry.h"
#include "runtime/cpu/buffer_store.h"
#include "util/status.h"

namespace evt::runtime::cpu {

enum class Schedule {
  kStatic,   // per-worker queues from the list scheduler; notify = release decrement, wait = acquire spin
  kDynamic,  // a global ready queue: a task is pushed once every element it awaits has fired
};

struct ExecOptions {
  Schedule schedule = Schedule::kStatic;
  int workers = 4;
  // Dynamic only: push consumers when the last producer of an element starts, not when it
  // finishes; they still wait on the count before running. Hides the push latency.
  bool early_push = false;
  std::optional<uint64_t> chaos_seed;           // seeded random delays and orders
  std::chrono::milliseconds watchdog{2000};     // no progress for this long stops the run
};

struct ExecStats {
  int64_t tasks_run = 0;
  int64_t tasks_inactive = 0;  // range-triggered tiles no range covered
  double wall_ms = 0;
};

// Runs every task once. Fails, never hangs, when the graph cannot complete: a stalled run stops
// after `watchdog` with a report of the stuck events, their remaining counts and their waiters.
Expected<ExecStats> execute(const ir::TileGraph& tg, const kernels::Registry& registry, BufferStore& store,
                            const ExecOptions& options);

// The serial reference: tasks one by one in the global topological order, on this thread. A wait
// that is not satisfied when its task's turn comes is an error: no schedule could satisfy it.
Expected<ExecStats> execute_serial(const ir::TileGraph& tg, const kernels::Registry& registry, BufferStore& store);

}  // namespace evt::runtime::cpu
