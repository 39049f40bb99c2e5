#include "runtime/cpu/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/cpu/backoff.h"
#include "runtime/cpu/chaos.h"
#include "runtime/cpu/ready_queue.h"
#include "runtime/static_schedule.h"
#include "util/check.h"

namespace evt::runtime::cpu {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kNone = -1;
// Per-task outcome.
constexpr uint8_t kNotRun = 0, kRan = 1, kInactive = 2;

enum class Mode { kSerial, kStatic, kDynamic };

// What a task group needs at run time, prepared once per run.
struct GroupCall {
  const kernels::TileFunction* fn = nullptr;
  std::vector<kernels::BufferView> reads, writes;
  std::vector<int> sets;  // event indices
};

// A worker's visible state, read by the watchdog's report.
struct WorkerState {
  std::atomic<int64_t> task{kNone};
  std::atomic<int64_t> waiting_on{kNone};
};

class Execution;

// Passes a tile function's run-time wait counts to the execution, for the group's `sets`.
class SetterAdapter : public kernels::WaitCountSetter {
 public:
  SetterAdapter(Execution& run, const GroupCall& call, int group, Chaos& chaos)
      : run_(run), call_(call), group_(group), chaos_(chaos) {}
  void set_wait_count(size_t set_index, int64_t element, int64_t count) override;
  Status status;

 private:
  Execution& run_;
  const GroupCall& call_;
  int group_;
  Chaos& chaos_;
};

class Execution {
 public:
  Execution(const ir::TileGraph& tg, const kernels::Registry& registry, BufferStore& store, Mode mode,
            const ExecOptions& options)
      : tg_(tg), graph_(tg.graph()), registry_(registry), store_(store), mode_(mode), options_(options),
        counts_(tg.num_elements()), started_(tg.num_elements()), pending_(tg.num_tasks()),
        ran_(tg.num_tasks()), workers_(mode == Mode::kSerial ? 1 : options.workers) {
    load_ = [this](const std::string& buffer, std::span<const int64_t> index) { return store_.load_index(buffer, index); };
  }

  Expected<ExecStats> run();

 private:
  friend class SetterAdapter;
  // --- setup
  Status prepare();
  // --- per task
  Status run_task(int64_t task, int worker, Chaos& chaos);
  Expected<bool> find_trigger(int64_t task, int worker);  // false: no range covers the task
  Status wait_element(int64_t element, int worker);
  Status notify(int64_t element, Chaos& chaos);
  Status fired(int64_t element, Chaos& chaos);
  Status release_consumers(int64_t element, Chaos& chaos);
  Status release_range_consumers(int64_t element, Chaos& chaos);
  void release(int64_t task);
  Status set_wait_count(int event, int64_t element, int64_t count, Chaos& chaos);
  bool early(int64_t element) const { return early_event_[tg_.event_of_element(element)]; }
  // --- workers
  void static_worker(int worker, const std::vector<int64_t>& queue);
  void dynamic_worker(int worker);
  void watchdog(std::atomic<bool>& finished);
  void fail(Status status);
  // --- reports
  const char* mode_name() const {
    return mode_ == Mode::kSerial ? "serial" : (mode_ == Mode::kStatic ? "static" : "dynamic");
  }
  std::string stuck_report(const std::string& headline) const;
  std::string describe_element(int64_t element) const;
  Status final_state_check() const;

  const ir::TileGraph& tg_;
  const ir::Graph& graph_;
  const kernels::Registry& registry_;
  BufferStore& store_;
  const Mode mode_;
  const ExecOptions options_;
  ir::TileGraph::LoadFn load_;

  std::vector<GroupCall> calls_;
  std::vector<bool> early_event_;
  std::vector<std::vector<std::pair<int, int>>> range_consumers_;  // event -> (group, in-edge)
  std::vector<std::atomic<int64_t>> counts_;   // remaining notifications per element
  std::vector<std::atomic<int64_t>> started_;  // early push: producers yet to start
  std::vector<std::atomic<int32_t>> pending_;  // dynamic: releases a task still needs
  std::vector<std::atomic<uint8_t>> ran_;
  std::unique_ptr<ReadyQueue> queue_;
  std::atomic<int64_t> outstanding_{0};  // pushed and not finished
  std::atomic<int64_t> progress_{0};
  std::atomic<bool> abort_{false};
  std::atomic<bool> stalled_{false};
  std::mutex error_mutex_;
  Status error_;
  const int workers_;
  std::unique_ptr<WorkerState[]> state_{new WorkerState[workers_]};
  std::vector<std::vector<int64_t>> tile_scratch_ = std::vector<std::vector<int64_t>>(workers_);
};

void SetterAdapter::set_wait_count(size_t set_index, int64_t element, int64_t count) {
  if (!status.ok()) return;
  if (set_index >= call_.sets.size()) {
    status = error("task group {} sets only {} events", run_.graph_.groups[group_].name, call_.sets.size());
    return;
  }
  status = run_.set_wait_count(call_.sets[set_index], element, count, chaos_);
}

Status Execution::prepare() {
  calls_.resize(graph_.groups.size());
  for (size_t g = 0; g < graph_.groups.size(); ++g) {
    const ir::TaskGroup& group = graph_.groups[g];
    GroupCall& call = calls_[g];
    call.fn = registry_.find(group.function);
    if (!call.fn) return error("task group {}: unknown tile function '{}'", group.name, group.function);
    if (static_cast<int>(group.reads.size()) != call.fn->num_reads ||
        static_cast<int>(group.writes.size()) != call.fn->num_writes) {
      return error("task group {}: tile function {} takes {} reads and {} writes, but the group passes {} and {}",
                   group.name, group.function, call.fn->num_reads, call.fn->num_writes, group.reads.size(),
                   group.writes.size());
    }
    for (const auto& [names, views] : {std::pair{&group.reads, &call.reads}, std::pair{&group.writes, &call.writes}}) {
      for (const std::string& n : *names) {
        const int b = graph_.buffer_index(n);
        if (b < 0) return error("task group {}: unknown buffer '{}'", group.name, n);
        views->push_back(store_.view(b));
      }
    }
    for (const std::string& s : group.sets) call.sets.push_back(graph_.event_index(s));
    if (mode_ == Mode::kDynamic) {
      for (int e : tg_.groups()[g].dd_in_edges) {
        return error("task group {}: in-edge {} is data-dependent and has no inverse, so dynamic "
                     "scheduling cannot tell which tasks an event releases; write it as a range trigger "
                     "\"e->[begin, end)\" or use the static schedule",
                     group.name, group.in_edges[e].str());
      }
    }
  }
  range_consumers_.assign(graph_.events.size(), {});
  for (size_t g = 0; g < graph_.groups.size(); ++g) {
    for (int e : tg_.groups()[g].range_trigger_edges) {
      range_consumers_[graph_.event_index(graph_.groups[g].in_edges[e].event)].emplace_back(static_cast<int>(g), e);
    }
  }
  early_event_.assign(graph_.events.size(), false);
  for (size_t e = 0; e < graph_.events.size(); ++e) {
    const ir::EventInstance& ev = tg_.events()[e];
    early_event_[e] = mode_ == Mode::kDynamic && options_.early_push && !ev.runtime_count && !ev.has_dd_producer;
  }
  for (int64_t x = 0; x < tg_.num_elements(); ++x) {
    counts_[x].store(tg_.initial_counts()[x], std::memory_order_relaxed);
    started_[x].store(tg_.static_notifications()[x], std::memory_order_relaxed);
  }
  for (int64_t t = 0; t < tg_.num_tasks(); ++t) {
    pending_[t].store(tg_.release_counts()[t], std::memory_order_relaxed);
    ran_[t].store(kNotRun, std::memory_order_relaxed);
  }
  return Status();
}

void Execution::fail(Status status) {
  std::lock_guard lock(error_mutex_);
  if (error_.ok()) error_ = std::move(status);
  abort_.store(true, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Events

Status Execution::wait_element(int64_t element, int worker) {
  if (counts_[element].load(std::memory_order_acquire) == 0) return Status();
  if (mode_ == Mode::kSerial) {
    // The caller prefixes the task's name.
    return error("waits on {}, which has not fired when its turn comes in topological order: {}",
                 tg_.element_name(element), describe_element(element));
  }
  state_[worker].waiting_on.store(element, std::memory_order_relaxed);
  Backoff backoff;
  while (counts_[element].load(std::memory_order_acquire) != 0) {
    if (abort_.load(std::memory_order_relaxed)) return error("aborted");
    backoff.pause();
  }
  state_[worker].waiting_on.store(kNone, std::memory_order_relaxed);
  return Status();
}

Status Execution::notify(int64_t element, Chaos& chaos) {
  chaos.maybe_delay();
  const int64_t before = counts_[element].fetch_sub(1, std::memory_order_acq_rel);
  if (before > ir::kWaitCountUnset / 2) {
    const ir::EventInstance& ev = tg_.events()[tg_.event_of_element(element)];
    return error("{} was notified before its run-time wait count was set (by task group {})",
                 tg_.element_name(element), ev.setter_group >= 0 ? graph_.groups[ev.setter_group].name : "<none>");
  }
  if (before <= 0) {
    return error("{} received more notifications than its wait count {}", tg_.element_name(element),
                 tg_.initial_counts()[element]);
  }
  progress_.fetch_add(1, std::memory_order_relaxed);
  return before == 1 ? fired(element, chaos) : Status();
}

Status Execution::fired(int64_t element, Chaos& chaos) {
  if (mode_ != Mode::kDynamic) return Status();
  // Early-push elements released their plain consumers when the last producer started.
  return early(element) ? release_range_consumers(element, chaos) : release_consumers(element, chaos);
}

Status Execution::release_consumers(int64_t element, Chaos& chaos) {
  std::vector<int64_t> consumers(tg_.consumers().row(element).begin(), tg_.consumers().row(element).end());
  chaos.shuffle(consumers);
  for (int64_t c : consumers) release(c);
  return release_range_consumers(element, chaos);
}

Status Execution::release_range_consumers(int64_t element, Chaos& chaos) {
  for (const auto& [g, e] : range_consumers_[tg_.event_of_element(element)]) {
    const ir::Edge& edge = graph_.groups[g].in_edges[e];
    EVT_ASSIGN_OR_RETURN(auto range, tg_.trigger_range(edge, element, load_));
    const ir::GroupInstance& gi = tg_.groups()[g];
    if (range.first < 0 || range.second > gi.num_tasks) {
      return error("task group {}: range trigger at {} releases tiles [{}, {}), outside the group's {} tiles",
                   graph_.groups[g].name, tg_.element_name(element), range.first, range.second, gi.num_tasks);
    }
    // A layered group's trigger releases tiles of its element's layer only (ir::layer_offset).
    if (gi.keeps_layer[e] && range.second > range.first) {
      const int64_t layer = tg_.element_coords(element)[0], per_layer = gi.num_tasks / gi.extents[0];
      if (range.first < layer * per_layer || range.second > (layer + 1) * per_layer) {
        return error("task group {}: range trigger at {} releases tiles [{}, {}), outside layer {}'s tiles [{}, {})",
                     graph_.groups[g].name, tg_.element_name(element), range.first, range.second, layer,
                     layer * per_layer, (layer + 1) * per_layer);
      }
    }
    std::vector<int64_t> tasks;
    for (int64_t t = range.first; t < range.second; ++t) tasks.push_back(gi.first_task + t);
    chaos.shuffle(tasks);
    for (int64_t t : tasks) release(t);
  }
  return Status();
}

void Execution::release(int64_t task) {
  if (pending_[task].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  queue_->push(task);
}

Status Execution::set_wait_count(int event, int64_t element, int64_t count, Chaos& chaos) {
  const ir::EventInstance& ev = tg_.events()[event];
  const std::string& name = graph_.events[event].name;
  if (element < 0 || element >= ev.num_elements) {
    return error("run-time wait count set for {} element {}, outside its {} elements", name, element, ev.num_elements);
  }
  if (count < 0) return error("run-time wait count of {}[{}] set to {}", name, element, count);
  const int64_t x = ev.first_element + element;
  int64_t unset = ir::kWaitCountUnset;
  if (!counts_[x].compare_exchange_strong(unset, count, std::memory_order_acq_rel)) {
    return error("run-time wait count of {} set twice", tg_.element_name(x));
  }
  return count == 0 ? fired(x, chaos) : Status();
}

// ---------------------------------------------------------------------------------------------
// Tasks

Expected<bool> Execution::find_trigger(int64_t task, int worker) {
  const int g = tg_.group_of_task(task);
  const int64_t local = task - tg_.groups()[g].first_task;
  for (int e : tg_.groups()[g].range_trigger_edges) {
    const ir::Edge& edge = graph_.groups[g].in_edges[e];
    const ir::EventInstance& ev = tg_.events()[graph_.event_index(edge.event)];
    // Only the task's layer's elements release it, when the trigger keeps the layer.
    int64_t first = ev.first_element, count = ev.num_elements;
    if (tg_.groups()[g].keeps_layer[e]) {
      count = ev.num_elements / ev.shape[0];
      first += tg_.task_coords(task)[0] * count;
    }
    if (ir::single_element_trigger(graph_, graph_.groups[g], edge)) {
      // The one element that can cover the task: wait for it, then read its range (its producers
      // wrote the index buffers before it fired; the verifier asks no other guard for them).
      EVT_RETURN_IF_ERROR(wait_element(first, worker));
      EVT_ASSIGN_OR_RETURN(auto range, tg_.trigger_range(edge, first, load_));
      if (local < range.first || local >= range.second) return false;
      continue;
    }
    int64_t found = kNone;
    for (int64_t x = first; x < first + count && found == kNone; ++x) {
      EVT_ASSIGN_OR_RETURN(auto range, tg_.trigger_range(edge, x, load_));
      if (range.first <= local && local < range.second) found = x;
    }
    if (found == kNone) return false;
    EVT_RETURN_IF_ERROR(wait_element(found, worker));
  }
  return true;
}

Status Execution::run_task(int64_t task, int worker, Chaos& chaos) {
  const int g = tg_.group_of_task(task);
  const ir::TaskGroup& group = graph_.groups[g];
  const ir::GroupInstance& gi = tg_.groups()[g];
  state_[worker].task.store(task, std::memory_order_relaxed);
  chaos.maybe_delay();

  for (int64_t x : tg_.in_elements().row(task)) EVT_RETURN_IF_ERROR(wait_element(x, worker));
  // Dynamic scheduling pushed range-triggered tasks only when a range covered them; the other
  // modes find the covering element themselves, now that the index buffers are ready.
  if (mode_ != Mode::kDynamic && !gi.range_trigger_edges.empty()) {
    EVT_ASSIGN_OR_RETURN(bool active, find_trigger(task, worker));
    if (!active) {
      ran_[task].store(kInactive, std::memory_order_relaxed);
      progress_.fetch_add(1, std::memory_order_relaxed);
      return Status();
    }
  }
  for (int e : gi.dd_in_edges) {
    std::vector<int64_t> elements;
    EVT_RETURN_IF_ERROR(tg_.resolve(task, group.in_edges[e], load_, [&](int64_t x) { elements.push_back(x); }));
    for (int64_t x : elements) EVT_RETURN_IF_ERROR(wait_element(x, worker));
  }

  for (int64_t x : tg_.out_elements().row(task)) {
    if (early(x) && started_[x].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      for (int64_t c : tg_.consumers().row(x)) release(c);
    }
  }

  const GroupCall& call = calls_[g];
  std::vector<int64_t>& tile = tile_scratch_[worker];
  tg_.task_coords(task, tile);
  SetterAdapter setter(*this, call, g, chaos);
  call.fn->cpu(kernels::TileArgs{tile, call.reads, call.writes, call.sets.empty() ? nullptr : &setter});
  EVT_RETURN_IF_ERROR(setter.status);
  ran_[task].store(kRan, std::memory_order_relaxed);

  for (int64_t x : tg_.out_elements().row(task)) EVT_RETURN_IF_ERROR(notify(x, chaos));
  for (int e : gi.dd_out_edges) {
    std::vector<int64_t> elements;
    EVT_RETURN_IF_ERROR(tg_.resolve(task, group.out_edges[e], load_, [&](int64_t x) { elements.push_back(x); }));
    for (int64_t x : elements) EVT_RETURN_IF_ERROR(notify(x, chaos));
  }
  progress_.fetch_add(1, std::memory_order_relaxed);
  state_[worker].task.store(kNone, std::memory_order_relaxed);
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Workers

void Execution::static_worker(int worker, const std::vector<int64_t>& queue) {
  Chaos chaos(options_.chaos_seed, worker);
  for (int64_t task : queue) {
    if (abort_.load(std::memory_order_relaxed)) return;
    Status s = run_task(task, worker, chaos);
    if (!s.ok()) return fail(s.with_context(tg_.task_name(task)));
  }
}

void Execution::dynamic_worker(int worker) {
  Chaos chaos(options_.chaos_seed, worker);
  auto finished = [&] {
    return outstanding_.load(std::memory_order_acquire) == 0 || abort_.load(std::memory_order_relaxed);
  };
  while (!abort_.load(std::memory_order_relaxed)) {
    const int64_t task = queue_->take(queue_->claim(), finished);
    if (task < 0) return;
    Status s = run_task(task, worker, chaos);
    if (!s.ok()) return fail(s.with_context(tg_.task_name(task)));
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);  // after this task's own pushes
  }
}

void Execution::watchdog(std::atomic<bool>& finished) {
  int64_t last = progress_.load();
  auto last_change = Clock::now();
  while (!finished.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const int64_t now = progress_.load(std::memory_order_relaxed);
    if (now != last) {
      last = now;
      last_change = Clock::now();
    } else if (Clock::now() - last_change > options_.watchdog) {
      stalled_.store(true);
      abort_.store(true, std::memory_order_release);
      return;
    }
  }
}

Expected<ExecStats> Execution::run() {
  EVT_RETURN_IF_ERROR(prepare());
  const auto start = Clock::now();
  if (mode_ == Mode::kSerial) {
    Chaos no_chaos(std::nullopt, 0);
    for (int64_t task : tg_.topo_order()) {
      Status s = run_task(task, 0, no_chaos);
      if (!s.ok()) return s.with_context(tg_.task_name(task));
    }
  } else {
    std::vector<std::thread> threads;
    std::atomic<bool> finished{false};
    if (mode_ == Mode::kStatic) {
      std::vector<double> cost(tg_.num_tasks());
      for (int64_t t = 0; t < tg_.num_tasks(); ++t) cost[t] = calls_[tg_.group_of_task(t)].fn->relative_cost;
      EVT_ASSIGN_OR_RETURN(StaticSchedule schedule, list_schedule(tg_, workers_, cost, options_.chaos_seed));
      for (int w = 0; w < workers_; ++w) {
        threads.emplace_back([this, w, q = std::move(schedule.queues[w])] { static_worker(w, q); });
      }
    } else {
      queue_ = std::make_unique<ReadyQueue>(tg_.num_tasks());
      // Elements that need no notification have fired already; then tasks that await nothing.
      Chaos chaos(options_.chaos_seed, workers_);
      for (int64_t x = 0; x < tg_.num_elements(); ++x) {
        if (tg_.initial_counts()[x] == 0) EVT_RETURN_IF_ERROR(release_consumers(x, chaos));
      }
      for (int64_t t = 0; t < tg_.num_tasks(); ++t) {
        if (tg_.release_counts()[t] == 0) {
          outstanding_.fetch_add(1, std::memory_order_relaxed);
          queue_->push(t);
        }
      }
      for (int w = 0; w < workers_; ++w) threads.emplace_back([this, w] { dynamic_worker(w); });
    }
    std::thread dog([&] { watchdog(finished); });
    for (auto& t : threads) t.join();
    finished.store(true, std::memory_order_release);
    dog.join();
  }
  ExecStats stats;
  stats.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (stalled_.load()) {
    return Status::error(stuck_report(fmt::format("no progress for {} ms ({} schedule, {} workers, {})",
                                                  options_.watchdog.count(), mode_name(),
                                                  workers_, ir::binding_str(tg_.binding()))));
  }
  if (!error_.ok()) return error_;
  EVT_RETURN_IF_ERROR(final_state_check());
  for (int64_t t = 0; t < tg_.num_tasks(); ++t) {
    stats.tasks_run += ran_[t].load() == kRan;
    // Dynamic scheduling never pushes an uncovered range-triggered tile; it counts as inactive.
    stats.tasks_inactive += ran_[t].load() != kRan;
  }
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Reports

std::string Execution::describe_element(int64_t element) const {
  const int64_t remaining = counts_[element].load();
  std::string s = remaining > ir::kWaitCountUnset / 2
                      ? "its run-time wait count was never set"
                      : fmt::format("{} of {} notifications missing", remaining, tg_.initial_counts()[element]);
  auto consumers = tg_.consumers().row(element);
  if (!consumers.empty()) {
    s += "; awaited by ";
    for (size_t i = 0; i < consumers.size() && i < 4; ++i) s += (i ? ", " : "") + tg_.task_name(consumers[i]);
    if (consumers.size() > 4) s += fmt::format(" and {} more", consumers.size() - 4);
  }
  return s;
}

std::string Execution::stuck_report(const std::string& headline) const {
  std::string s = headline;
  for (int w = 0; w < workers_; ++w) {
    const int64_t task = state_[w].task.load(), x = state_[w].waiting_on.load();
    if (task == kNone) continue;
    s += x == kNone ? fmt::format("\n  worker {}: in {}", w, tg_.task_name(task))
                    : fmt::format("\n  worker {}: {} waits on {}: {}", w, tg_.task_name(task), tg_.element_name(x),
                                  describe_element(x));
  }
  constexpr int kMaxListed = 10;
  int listed = 0, unfired = 0;
  std::string events;
  for (int64_t x = 0; x < tg_.num_elements(); ++x) {
    if (counts_[x].load() == 0 || tg_.consumers().row(x).empty()) continue;
    bool waiting = false;
    for (int64_t c : tg_.consumers().row(x)) waiting = waiting || !ran_[c].load();
    if (!waiting) continue;
    ++unfired;
    if (listed++ < kMaxListed) events += fmt::format("\n  {}: {}", tg_.element_name(x), describe_element(x));
  }
  if (unfired) s += fmt::format("\nevents that never fired, with waiting tasks ({}):{}", unfired, events);
  if (unfired > kMaxListed) s += fmt::format("\n  ... and {} more", unfired - kMaxListed);
  return s;
}

Status Execution::final_state_check() const {
  int64_t never_ran = 0;
  for (int64_t t = 0; t < tg_.num_tasks(); ++t) {
    // Under dynamic scheduling an uncovered range-triggered tile is simply never pushed. That it
    // was uncovered, rather than held back by an element that never fired, follows from the
    // element check below: every element fired, so every range was released.
    const bool range_triggered = !tg_.groups()[tg_.group_of_task(t)].range_trigger_edges.empty();
    if (ran_[t].load() == kNotRun && !(mode_ == Mode::kDynamic && range_triggered)) ++never_ran;
  }
  bool unfired = false;
  for (int64_t x = 0; x < tg_.num_elements() && !unfired; ++x) unfired = counts_[x].load() != 0;
  if (never_ran == 0 && !unfired) return Status();
  return Status::error(stuck_report(fmt::format(
      "the run ended with {} tasks not run and events not fired ({} schedule, {})", never_ran,
      mode_name(),
      ir::binding_str(tg_.binding()))));
}

}  // namespace

Expected<ExecStats> execute(const ir::TileGraph& tg, const kernels::Registry& registry, BufferStore& store,
                            const ExecOptions& options) {
  if (options.workers < 1) return error("need at least one worker, got {}", options.workers);
  Execution run(tg, registry, store, options.schedule == Schedule::kStatic ? Mode::kStatic : Mode::kDynamic, options);
  return run.run();
}

Expected<ExecStats> execute_serial(const ir::TileGraph& tg, const kernels::Registry& registry, BufferStore& store) {
  Execution run(tg, registry, store, Mode::kSerial, ExecOptions{});
  return run.run();
}

}  // namespace evt::runtime::cpu
