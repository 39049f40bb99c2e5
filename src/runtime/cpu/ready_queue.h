#pragma once
// The dynamic scheduler's global ready queue: multi-producer, multi-consumer, lock-free.
// Every task is pushed at most once, so the queue is an array with two tickets: a pusher takes
// slot tail++ and publishes the task with a release store; a worker takes ticket head++ and
// waits (acquire) until that slot is published or the run is over. This is the same design the
// GPU uses: one atomic per push and per pop, no CAS loops.

#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/cpu/backoff.h"
#include "util/check.h"

namespace evt::runtime::cpu {

class ReadyQueue {
 public:
  explicit ReadyQueue(int64_t capacity) : capacity_(capacity), slots_(new std::atomic<int64_t>[capacity]) {
    for (int64_t i = 0; i < capacity; ++i) slots_[i].store(kEmpty, std::memory_order_relaxed);
  }

  void push(int64_t task) {
    const int64_t slot = tail_.fetch_add(1, std::memory_order_relaxed);
    EVT_CHECK(slot < capacity_) << "ready queue overflow: a task was released twice";
    slots_[slot].store(task, std::memory_order_release);
  }

  int64_t claim() { return head_.fetch_add(1, std::memory_order_relaxed); }

  // The task published at `ticket`, or -1 once `finished()` holds before it is published.
  template <typename Finished>
  int64_t take(int64_t ticket, Finished&& finished) {
    Backoff backoff;
    while (true) {
      if (ticket < capacity_) {
        const int64_t task = slots_[ticket].load(std::memory_order_acquire);
        if (task != kEmpty) return task;
      }
      if (finished()) return -1;
      backoff.pause();
    }
  }

 private:
  static constexpr int64_t kEmpty = -1;
  const int64_t capacity_;
  std::unique_ptr<std::atomic<int64_t>[]> slots_;
  alignas(64) std::atomic<int64_t> tail_{0};
  alignas(64) std::atomic<int64_t> head_{0};
};

}  // namespace evt::runtime::cpu
