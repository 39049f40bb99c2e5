#pragma once
// Static scheduling: per-worker queues from a list scheduler that follows one global
// topological order. Each worker runs its queue in order, so the first unfinished task in the
// global order always has all its producers done and heads its queue: no deadlock is possible.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ir/tile_graph.h"

namespace evt::runtime {

struct StaticSchedule {
  std::vector<std::vector<int64_t>> queues;  // per worker, in global topological order
};

// Assigns each task, in topological order, to the worker that can start it earliest given the
// estimated finish times of its producers. `task_cost` is indexed by task id. With a chaos seed
// the order's ties are broken at random and tasks go to random workers: still a valid schedule.
Expected<StaticSchedule> list_schedule(const ir::TileGraph& tg, int workers, std::span<const double> task_cost,
                                       std::optional<uint64_t> chaos_seed = std::nullopt);

}  // namespace evt::runtime
