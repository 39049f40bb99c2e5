#include "runtime/static_schedule.h"

#include <algorithm>
#include <queue>
#include <random>

#include "util/check.h"

namespace evt::runtime {

Expected<StaticSchedule> list_schedule(const ir::TileGraph& tg, int workers, std::span<const double> task_cost,
                                       std::optional<uint64_t> chaos_seed) {
  EVT_CHECK(workers > 0) << "list_schedule needs a worker";
  EVT_CHECK(static_cast<int64_t>(task_cost.size()) == tg.num_tasks()) << "one cost per task";

  std::vector<int64_t> order;
  std::mt19937_64 rng(chaos_seed.value_or(0));
  if (chaos_seed) {
    std::vector<uint64_t> keys(tg.num_tasks());
    for (auto& k : keys) k = rng();
    EVT_ASSIGN_OR_RETURN(order, tg.topological_order([&](int64_t t) { return keys[t]; }));
  } else {
    order.assign(tg.topo_order().begin(), tg.topo_order().end());
  }

  std::vector<double> element_ready(tg.num_elements(), 0);
  std::vector<double> group_finish(tg.groups().size(), 0);
  std::vector<double> worker_free(workers, 0);
  using Slot = std::pair<double, int>;  // (free at, worker)
  std::priority_queue<Slot, std::vector<Slot>, std::greater<>> free_workers;
  for (int w = 0; w < workers; ++w) free_workers.emplace(0.0, w);

  StaticSchedule s;
  s.queues.resize(workers);
  for (int64_t t : order) {
    const int g = tg.group_of_task(t);
    double ready = 0;
    for (int64_t x : tg.in_elements().row(t)) ready = std::max(ready, element_ready[x]);
    for (const ir::GroupPred& p : tg.group_predecessors(g)) ready = std::max(ready, group_finish[p.group]);

    int w;
    if (chaos_seed) {
      w = static_cast<int>(rng() % workers);
    } else {
      w = free_workers.top().second;
      free_workers.pop();
    }
    const double finish = std::max(worker_free[w], ready) + task_cost[t];
    worker_free[w] = finish;
    if (!chaos_seed) free_workers.emplace(finish, w);
    s.queues[w].push_back(t);

    group_finish[g] = std::max(group_finish[g], finish);
    for (int64_t x : tg.out_elements().row(t)) element_ready[x] = std::max(element_ready[x], finish);
  }
  return s;
}

}  // namespace evt::runtime
