#pragma once
// The CPU backend of generated megakernels: each worker is a thread standing in for an SM, with
// a block of one thread. CI runs the generated scheduling code through it.

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/block_scratch.h"
#include "runtime/megakernel/support.h"

namespace evt::mk {

class CpuWorker {
 public:
  // No loader runs ahead on the host: the worker decodes its static order's tasks itself.
  static constexpr bool kLoaderDecodes = false;
  static constexpr int kPassSets = 1;

  CpuWorker(int id, int count) : id_(id), count_(count) {}

  int id() const { return id_; }
  int count() const { return count_; }
  bool leader() const { return true; }
  void sync() const {}
  // A block of one thread has no barriers to trace.
  template <class Fn>
  void take_barriers(Fn&&) const {}
  template <typename T>
  T share(T v) const {
    return v;
  }

  uint64_t load_acquire(const uint64_t* p) const {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  }
  uint64_t fetch_add_release(uint64_t* p, uint64_t v) const {
    return std::atomic_ref<uint64_t>(*p).fetch_add(v, std::memory_order_acq_rel);
  }
  void fence_release() const { std::atomic_thread_fence(std::memory_order_release); }
  uint64_t fetch_add_relaxed(uint64_t* p, uint64_t v) const {
    return std::atomic_ref<uint64_t>(*p).fetch_add(v, std::memory_order_relaxed);
  }
  void fence_acquire() const { std::atomic_thread_fence(std::memory_order_acquire); }
  static uint64_t fetch_max(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t> a(*p);
    uint64_t old = a.load(std::memory_order_relaxed);
    while (old < v && !a.compare_exchange_weak(old, v, std::memory_order_acq_rel)) {
    }
    return old;
  }
  bool compare_exchange(uint64_t* p, uint64_t& expected, uint64_t desired) const {
    return std::atomic_ref<uint64_t>(*p).compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }
  void store_release(uint64_t* p, uint64_t v) const {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  void store_relaxed(uint64_t* p, uint64_t v) const { std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed); }
  uint64_t now_ns() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }
  // Workers may outnumber cores: yield so the thread being waited for runs.
  void pause() const { std::this_thread::yield(); }

  // The tile-body block interface (tile_body.h): one thread, which copies each chunk of a task's
  // weight stream as the body acquires it (no loader runs ahead on the host).
  int thread() const { return 0; }
  int threads() const { return 1; }
  kernels::Scratch scratch() const { return kernels::host_scratch(); }
  kernels::CopyingStreamReader weights(const kernels::WeightStream& s) const {
    return kernels::CopyingStreamReader(s, kernels::host_chunk_buffer());
  }
  void announce(int64_t) const {}
  bool queue_inline(int64_t task) {
    if (inline_.size() - next_ >= kInlineSlots) return false;
    inline_.push_back(task);
    return true;
  }
  int64_t next_inline() {
    if (next_ == inline_.size()) {
      inline_.clear();
      next_ = 0;
      return -1;
    }
    return inline_[next_++];
  }

 private:
  int id_, count_;
  std::vector<int64_t> inline_;  // queued inline tasks, run from next_ on
  size_t next_ = 0;
};

}  // namespace evt::mk
