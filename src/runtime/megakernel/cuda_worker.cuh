#pragma once
// The CUDA backend of generated megakernels: one worker per thread block. The block's first
// `consumers` threads run tasks (thread 0 schedules); a megakernel with weight streams has one
// more warp, the loader, which fills the weight ring (weight_ring.cuh) ahead of them. The
// consumers synchronize on a named barrier of their own, so the loader never blocks them.
// Device-scope atomics order tile data between blocks: a notifier's block barrier, release fence
// and add publish the tile's writes; a waiter's acquire load and block barrier receive them.

#include <cuda/atomic>

#include "kernels/block_scratch.h"
#include "runtime/megakernel/support.h"
#include "runtime/megakernel/weight_ring.cuh"

namespace evt::mk {

// A task of the static order as the loader decoded it for the consumers (CudaWorker::post_task).
struct DecodedTask {
  int64_t linear;
  int64_t t[4];  // its tile coordinates (unravel)
  int32_t group;
};
// Tasks the loader may decode ahead of the consumers. It runs ahead by what the ring holds, and
// a layer has a handful of tasks a block, so it seldom waits for a slot.
inline constexpr uint32_t kTaskSlots = 8;

// A worker's words in the block's static shared memory.
struct WorkerShared {
  uint64_t share_slots[2];              // share()
  RingState ring;                       // the weight ring's control words
  int64_t inline_tasks[kInlineSlots];   // the leader's queue of inline tasks
  int32_t inline_next, inline_end;      // its entries taken and queued
  DecodedTask tasks[kTaskSlots];        // the static order's next tasks, decoded by the loader
  uint32_t tasks_posted, tasks_taken;   // tasks the loader decoded; tasks every consumer is done with
  uint64_t barriers[kTraceBarriers];    // when tracing: the barriers' release times (sync())
  uint32_t barrier_count;               // since take_barriers()
  // The launch's fields the worker reads (init()). Copies, not a reference to the LaunchArgs: the
  // worker reaches out-of-line calls, and a reference to the kernel's parameter there makes every
  // read of the parameter a load through the L1 (support.h, trace_task).
  SchedulerState* state;
  int64_t spin_limit_ns;
  int32_t poll_ns;
  int32_t prefetch_in_flight;  // load(): at most this many fills in flight ahead of a task
  bool tracing;
};

// The block's WorkerShared. Named by its shared-memory symbol at every use rather than held as a
// pointer: the pointer was a 64-bit generic address that lived in registers for the whole kernel,
// and once the kernel grew ptxas spilled it and every body reloaded it from local memory
// (bench/README.md, "The worker's shared words by their symbol"); the symbol's address is a
// constant.
__device__ inline WorkerShared& worker_shared() {
  __shared__ WorkerShared shared;
  return shared;
}

class CudaWorker {
 public:
  // Under the static schedule the loader decodes each position of the block's static order (it
  // walks them anyway, for their streams) and hands the consumers the task: decoding between two
  // tasks was code the consumers ran, and fetched, on every hand-off.
  static constexpr bool kLoaderDecodes = true;
  // Projection passes of one set of 16 tokens (WideCudaWorker: more).
  static constexpr int kPassSets = 1;

  // `ring_stages`: the weight ring's stages (0: no ring), set up by init() before any other use.
  __device__ CudaWorker(int consumers, int ring_stages) : consumers_(consumers), stages_(ring_stages) {}

  // Every thread of the block, once at the start: sets up the ring and the worker's copy of the
  // launch's fields.
  __device__ void init(const LaunchArgs& a) {
    if (threadIdx.x == 0 && stages_ > 0) init_ring(worker_shared().ring, stages_, consumers_ / 32);
    if (threadIdx.x == 0) {
      WorkerShared& s = worker_shared();
      s.barrier_count = 0;
      s.inline_next = s.inline_end = 0;
      s.tasks_posted = s.tasks_taken = 0;
      s.state = a.state;
      s.spin_limit_ns = a.spin_limit_ns;
      s.poll_ns = a.poll_ns;
      s.prefetch_in_flight = a.prefetch_in_flight > 0 ? a.prefetch_in_flight : kMaxRingStages;
      s.tracing = a.trace != nullptr;
    }
    __syncthreads();
  }

  __device__ int id() const { return static_cast<int>(blockIdx.x); }
  __device__ int count() const { return static_cast<int>(gridDim.x); }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ bool is_loader() const { return static_cast<int>(threadIdx.x) >= consumers_; }
  // A barrier of the consumer threads (named barrier 1; the loader warp never waits on it). When
  // tracing, the leader notes when it released (trace_task).
  __device__ void sync() const { sync_of(consumers_); }
  // ... of `consumers` threads: a WideCudaWorker passes its constant count.
  __device__ void sync_of(int consumers) const {
    asm volatile("bar.sync 1, %0;" ::"r"(consumers) : "memory");
    if (leader() && worker_shared().tracing) note_barrier();
  }
  // The leader: fn(t) for each barrier noted since the last call, in order; then forgets them.
  template <class Fn>
  __device__ void take_barriers(Fn&& fn) const {
    const uint32_t n = worker_shared().barrier_count < kTraceBarriers ? worker_shared().barrier_count : kTraceBarriers;
    for (uint32_t k = 0; k < n; ++k) fn(worker_shared().barriers[k]);
    worker_shared().barrier_count = 0;
  }
  // One barrier: the two slots alternate, and a slot is written again only two shares later,
  // after every thread passed the barrier of the share in between, so all have read it.
  template <typename T>
  __device__ T share(T v) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "share() moves at most 8 bytes");
    T* slot = reinterpret_cast<T*>(worker_shared().share_slots + parity_);
    parity_ ^= 1;
    if (leader()) *slot = v;
    sync();
    return *slot;
  }

  __device__ uint64_t load_acquire(const uint64_t* p) const { return ref(p).load(cuda::memory_order_acquire); }
  // After the block barrier, a release fence and a relaxed add publish the whole block's writes.
  // (A single atom.release measured slower on the H200: 1.38 us per dependent hop against 1.16.)
  __device__ uint64_t fetch_add_release(uint64_t* p, uint64_t v) const {
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    return ref(p).fetch_add(v, cuda::memory_order_relaxed);
  }
  // A task's notifications: one release fence after the block barrier, then a relaxed add per
  // element (128 fenced adds take 34 us on one thread, 128 adds after one fence 5: moe_plan_micro).
  __device__ void fence_release() const {
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
  }
  __device__ uint64_t fetch_add_relaxed(uint64_t* p, uint64_t v) const {
    return ref(p).fetch_add(v, cuda::memory_order_relaxed);
  }
  __device__ void fence_acquire() const {
    cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
  }
  __device__ static uint64_t fetch_max(uint64_t* p, uint64_t v) { return ref(p).fetch_max(v, cuda::memory_order_relaxed); }
  __device__ bool compare_exchange(uint64_t* p, uint64_t& expected, uint64_t desired) const {
    return ref(p).compare_exchange_strong(expected, desired, cuda::memory_order_relaxed);
  }
  __device__ void store_release(uint64_t* p, uint64_t v) const {
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    ref(p).store(v, cuda::memory_order_relaxed);
  }
  __device__ void store_relaxed(uint64_t* p, uint64_t v) const { ref(p).store(v, cuda::memory_order_relaxed); }
  __device__ uint64_t now_ns() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  // A short sleep between polls: many blocks polling one counter slow down its writers.
  __device__ void pause() const { __nanosleep(static_cast<unsigned>(worker_shared().poll_ns)); }

  // The tile-body block interface (tile_body.h).
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int threads() const { return consumers_; }
  __device__ kernels::Scratch scratch() const {
    const kernels::Scratch s = kernels::dynamic_shared_memory();
    const int64_t ring = int64_t{stages_} * kernels::kChunkBytes;
    return kernels::Scratch{s.data + ring, s.bytes - ring};
  }

  // The consumers' reader of a task's stream. Every consumer thread acquires and releases every
  // chunk, in order; the chunks were (or are being) filled by the loader from the same stream.
  // The reader keeps this thread's place in the ring in its own fields while the task runs, and
  // hands it back to the worker when it goes: the worker lives in local memory (the out-of-line
  // checks take it), where ptxas once reloaded and stored the place at every chunk of the wide
  // entry's passes (bench/README.md, "The residual stream in bf16").
  class Reader {
   public:
    __device__ explicit Reader(CudaWorker& w)
        : w_(w), stages_(w.stages_), stage_(w.stage_), phase_(w.phase_), wrapped_(w.wrapped_) {}
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    __device__ ~Reader() {
      w_.stage_ = stage_;
      w_.phase_ = phase_;
      w_.wrapped_ = wrapped_;
    }
    __device__ const unsigned char* acquire() {
      // A fill that never lands is a bug: stop the launch rather than hang, and let the body
      // finish on whatever the stage holds (the launch reports the error).
      w_.wait_until([&] { return phase_done(&worker_shared().ring.full[stage_], phase_); }, ErrorKind::kTimeout);
      return w_.stage_data(stage_);
    }
    __device__ void release() {
      release_stage(&worker_shared().ring.empty[stage_]);
      advance_place(stages_, stage_, phase_, wrapped_);
    }

   private:
    CudaWorker& w_;
    int stages_, stage_;
    uint32_t phase_;
    bool wrapped_;
  };
  __device__ Reader weights(const kernels::WeightStream&) { return Reader(*this); }

  // The leader's queue of inline tasks (the notifications of its block released them). Its
  // counters are in shared memory, not in this object: the object lives on the stack (the
  // out-of-line checks take it), and in a local-memory slot the counters were reloaded at every
  // queue and poll site of the MoE megakernel, missing the little L1 its scratch leaves.
  __device__ bool queue_inline(int64_t task) {
    const int32_t end = worker_shared().inline_end;
    if (end - worker_shared().inline_next >= static_cast<int32_t>(kInlineSlots)) return false;
    worker_shared().inline_tasks[end % kInlineSlots] = task;
    worker_shared().inline_end = end + 1;
    return true;
  }
  __device__ int64_t next_inline() {
    const int32_t next = worker_shared().inline_next;
    if (next == worker_shared().inline_end) return -1;
    worker_shared().inline_next = next + 1;
    return worker_shared().inline_tasks[next % kInlineSlots];
  }

  // --- the loader (lane 0 of the loader warp)

  // Fills the ring with every chunk of `s`, each once its stage is free. False when the launch
  // aborted meanwhile. `ahead`: the stream of a task of the static order, whose first ring of
  // chunks the loader fills while the consumers finish the task before and wait for this one's
  // inputs; those fills go out at most `prefetch_in_flight` at a time, so that the wait's round
  // trips do not queue behind them (launch_knobs.cc).
  __device__ bool load(const kernels::WeightStream& s, bool ahead) {
    const int paced = ahead ? stages_ : 0;
    int fills = 0;
    for (kernels::StreamCursor cursor(s); !cursor.done(); advance(), ++fills) {
      // The stage's previous fill (one round of the ring ago, phase_ ^ 1) must have been released.
      if (wrapped_ && !wait_until([&] { return phase_done(&worker_shared().ring.empty[stage_], phase_ ^ 1); },
                                  ErrorKind::kQueueTimeout)) {
        return false;
      }
      if (fills < paced && !landed_behind(worker_shared().prefetch_in_flight)) return false;
      fill_stage(cursor, stage_data(stage_), &worker_shared().ring.full[stage_]);
    }
    return true;
  }
  // Waits until the fill `behind` fills before the next one has landed (at once when there is
  // none), so that at most `behind` are in flight. False when the launch aborted.
  __device__ bool landed_behind(int behind) {
    if (behind >= stages_) return true;  // the ring's own bound
    int s = stage_ - behind;
    uint32_t parity = phase_;
    if (s < 0) {
      if (!wrapped_) return true;
      s += stages_;
      parity ^= 1;
    }
    return wait_until([&] { return phase_done(&worker_shared().ring.full[s], parity); }, ErrorKind::kQueueTimeout);
  }
  // Before the loader leaves: every copy it started has landed (a block must not exit with
  // copies into its shared memory in flight, as it can after an abort). The last fill of each
  // stage is that of the round before the current one for the stages already passed in this
  // round.
  __device__ void finish_loading() {
    for (int s = 0; s < stages_; ++s) {
      if (!wrapped_ && s >= stage_) break;  // never filled
      const uint32_t parity = s < stage_ ? phase_ : phase_ ^ 1;
      while (!phase_done(&worker_shared().ring.full[s], parity)) {
      }
    }
  }

  // The static order's tasks, decoded once by the loader. The loader posts the k-th task of the
  // block's static order (post_task); every consumer thread takes it as its k-th (take_task). Task
  // k's slot is written again, for task k + kTaskSlots, only once the leader took task k + 1, by
  // when every consumer thread has read it (task k's barriers lie between). False when the launch
  // aborted.
  __device__ bool post_task(int group, int64_t linear, const int64_t* t) {
    auto posted = block_word(worker_shared().tasks_posted);
    const uint32_t n = posted.load(cuda::memory_order_relaxed);
    auto taken = block_word(worker_shared().tasks_taken);
    if (!wait_until([&] { return n - taken.load(cuda::memory_order_acquire) < kTaskSlots; }, ErrorKind::kQueueTimeout)) {
      return false;
    }
    DecodedTask& d = worker_shared().tasks[n % kTaskSlots];
    d.group = group;
    d.linear = linear;
    for (int k = 0; k < 4; ++k) d.t[k] = t[k];
    posted.store(n + 1, cuda::memory_order_release);
    return true;
  }
  __device__ bool take_task(uint32_t k, int& group, int64_t& linear, int64_t* t) {
    if (leader()) block_word(worker_shared().tasks_taken).store(k, cuda::memory_order_release);
    if (!wait_until([&] { return block_word(worker_shared().tasks_posted).load(cuda::memory_order_acquire) > k; },
                    ErrorKind::kQueueTimeout)) {
      return false;
    }
    const DecodedTask& d = worker_shared().tasks[k % kTaskSlots];
    group = d.group;
    linear = d.linear;
    for (int i = 0; i < 4; ++i) t[i] = d.t[i];
    return true;
  }

  // Dynamic scheduling: the leader announces each task (task_id) before its body,
  // and kAnnounceStop when it is done; the loader takes them in order.
  __device__ void announce(int64_t task) {
    if (stages_ == 0) return;
    auto posted = block_word(worker_shared().ring.posted);
    const uint32_t n = posted.load(cuda::memory_order_relaxed);
    auto taken = block_word(worker_shared().ring.taken);
    wait_until([&] { return n - taken.load(cuda::memory_order_acquire) < kMailboxSlots; }, ErrorKind::kQueueTimeout);
    worker_shared().ring.mailbox[n % kMailboxSlots] = task;
    posted.store(n + 1, cuda::memory_order_release);
  }
  // The next announced task, or kAnnounceStop (also when the launch aborted).
  __device__ int64_t next_announced() {
    auto taken = block_word(worker_shared().ring.taken);
    const uint32_t n = taken.load(cuda::memory_order_relaxed);
    if (!wait_until([&] { return block_word(worker_shared().ring.posted).load(cuda::memory_order_acquire) != n; },
                    ErrorKind::kQueueTimeout)) {
      return kAnnounceStop;
    }
    const int64_t task = worker_shared().ring.mailbox[n % kMailboxSlots];
    taken.store(n + 1, cuda::memory_order_release);
    return task;
  }

 private:
  // Polls `done()`; false when the launch aborted first, or when the launch's spin limit passed
  // (which aborts it with a `what` record). Without a scheduler to record it in (a.state null:
  // the tile tests), a wait past the limit traps.
  // The check stays inline, with `start` in a register: the consumers and the loader wait here
  // for every weight chunk, and with the check out of line (975af49) `start` lived on the stack, a
  // local store per chunk and thread, and 8B's gate/up pass at B = 1 took 14% longer (H200).
  template <class Done>
  __device__ bool wait_until(Done&& done, ErrorKind what) {
    uint64_t start = 0;
    for (uint32_t spins = 1; !done(); ++spins) {
      if ((spins & 63) != 0) continue;
      SchedulerState* const state = worker_shared().state;
      if (state != nullptr && aborted(*this, state)) return false;
      if (start == 0) start = now_ns();
      if (static_cast<int64_t>(now_ns() - start) > worker_shared().spin_limit_ns) {
        time_out(what);
        return false;
      }
    }
    return true;
  }
  // A wait past the spin limit: the launch's error record, or a trap without one.
  EVT_NOINLINE __device__ void time_out(ErrorKind what) {
    if (worker_shared().state == nullptr) __trap();
    record_failure<CudaWorker>(worker_shared().state, id(), what, -1, nullptr, 0, -1, -1, 0);
  }
  // sync()'s note of when a barrier released, when tracing (out of line: sync() is everywhere).
  EVT_NOINLINE __device__ void note_barrier() const {
    const uint32_t n = worker_shared().barrier_count++;
    if (n < kTraceBarriers) worker_shared().barriers[n] = now_ns();
  }

  __device__ static cuda::atomic_ref<uint64_t, cuda::thread_scope_device> ref(const uint64_t* p) {
    return cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(*const_cast<uint64_t*>(p));
  }
  __device__ unsigned char* stage_data(int stage) const {
    return kernels::dynamic_shared_memory().data + int64_t{stage} * kernels::kChunkBytes;
  }
  // The next chunk of the launch goes to the next stage; each round of the ring flips the phase
  // its barriers are awaited in.
  __device__ static void advance_place(int stages, int& stage, uint32_t& phase, bool& wrapped) {
    if (++stage == stages) {
      stage = 0;
      phase ^= 1;
      wrapped = true;
    }
  }
  __device__ void advance() { advance_place(stages_, stage_, phase_, wrapped_); }

  int consumers_;
  int stages_;
  int parity_ = 0;
  // This thread's place in the ring (consumers: the next chunk to consume; the loader: to fill).
  int stage_ = 0;
  uint32_t phase_ = 0;
  bool wrapped_ = false;
};

// The worker of a megakernel entry whose bodies' projection passes take up to kSets sets of 16
// tokens (kernels/llm/gemv.h, tile_body.h): their sums take registers that, in the entry every
// step runs, made ptxas spill across the whole megakernel, so steps of many tokens run an entry
// of their own (cuda_launch.cuh). Its bodies' block size and barrier count are the constant
// kConsumers: read from the worker, which lives in local memory, they were reloaded in nearly
// every loop of the entry once its registers ran short (bench/README.md, "The residual stream in
// bf16").
template <int kSets, int kConsumers>
class WideCudaWorker : public CudaWorker {
 public:
  static constexpr int kPassSets = kSets;
  using CudaWorker::CudaWorker;
  __device__ int threads() const { return kConsumers; }
  __device__ void sync() const { sync_of(kConsumers); }
};

}  // namespace evt::mk
