#pragma once
// A generated megakernel on a CUDA device: one persistent grid, sized for co-residency from the
// occupancy API (asserted), two scheduler arenas that only grow (each launch zeroes the other),
// and the device's error record turned into a Status. Host code (compiled by the host
// compiler); the kernel itself is instantiated in a .cu file through CudaLaunch.

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/megakernel/cuda_launch.h"
#include "runtime/megakernel/instance.h"

namespace evt::mk {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  return error("{} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
#define EVT_CUDA_RETURN(call) EVT_RETURN_IF_ERROR(::evt::mk::cuda_status((call), #call))

// Zeroes device memory before later work on any stream can touch it. cudaMemset runs on the
// legacy default stream, which the non-blocking streams that steps and launches use are not
// ordered after: a step's input copy on its own stream could land first and then be zeroed. (At
// Qwen3-8B B = 64 steps failed with an illegal address that fits this: the KV append read a page
// size of 0 from cfg, in the first steps after the input buffer grew.)
inline cudaError_t zero_now(void* data, size_t bytes) {
  const cudaError_t e = cudaMemset(data, 0, bytes);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

// Zero-initialized device words, freed on destruction.
class DeviceWords {
 public:
  DeviceWords() = default;
  DeviceWords(const DeviceWords&) = delete;
  DeviceWords(DeviceWords&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  DeviceWords& operator=(const DeviceWords&) = delete;
  ~DeviceWords() {
    if (data_) cudaFree(data_);
  }
  // Ensures room for `n` words; new memory is zero, like an arena after a finished launch.
  Status reserve(size_t n) {
    if (n <= size_) return Status();
    if (data_) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
    EVT_CUDA_RETURN(cudaMalloc(&data_, n * sizeof(uint64_t)));
    EVT_CUDA_RETURN(zero_now(data_, n * sizeof(uint64_t)));
    size_ = n;
    return Status();
  }
  uint64_t* data() const { return data_; }

 private:
  uint64_t* data_ = nullptr;
  size_t size_ = 0;
};

template <class MK>
class CudaMegakernel {
 public:
  struct Options {
    Schedule schedule = kStatic;
    // Dynamic schedules: push consumers once their producers start rather than finish.
    bool early_push = false;
    // Kernels mode only: replay the launch sequence from a CUDA graph captured once per set of
    // parameters (the vLLM/SGLang approach), instead of launching each kernel.
    bool cuda_graph = false;
    // With cuda_graph: dim `bucket_dim` is rounded up to the smallest of `buckets` (ascending)
    // and one graph is captured per bucket, as vLLM and SGLang pad batches. The buffers must
    // hold the largest bucket; the padding rows compute on whatever they hold.
    int bucket_dim = -1;
    std::vector<int64_t> buckets;
    int blocks = 0;  // megakernel grid; 0: one block per SM
    int64_t spin_limit_ns = 1'000'000'000;
    cudaStream_t stream = nullptr;
    bool trace = false;  // record every task (last_trace()); not with cuda_graph
    // Scratch (dynamic shared memory) per block, bytes; 0: the most the kernel allows. What the
    // tile bodies do not need is L1 cache, which the kernel's spills and stack live in.
    int scratch_bytes = 0;
    // The most stages the weight ring takes in what the scratch leaves; 0: kDefaultRingStages.
    int ring_stages = 0;
    // The static schedule: run the entry of wide passes (CudaLaunch::launch).
    bool wide_passes = false;
  };

  static Expected<std::unique_ptr<CudaMegakernel>> create(int device = 0) {
    auto k = std::unique_ptr<CudaMegakernel>(new CudaMegakernel());
    EVT_CUDA_RETURN(cudaSetDevice(device));
    EVT_CUDA_RETURN(cudaDeviceGetAttribute(&k->sms_, cudaDevAttrMultiProcessorCount, device));
    EVT_CUDA_RETURN(CudaLaunch<MK>::blocks_per_sm(&k->blocks_per_sm_));
    if (k->blocks_per_sm_ < 1) return error("the megakernel does not fit on an SM (occupancy 0)");
    return k;
  }

  ~CudaMegakernel() { drop_graphs(); }

  int sms() const { return sms_; }
  int max_coresident_blocks() const { return sms_ * blocks_per_sm_; }
  // Milliseconds the last CUDA-graph capture and instantiation took (0 if it was cached), and the
  // graphs captured so far.
  double last_capture_ms() const { return last_capture_ms_; }
  size_t captured_graphs() const { return graphs_.size(); }
  // The tasks of the last launch run with Options::trace.
  const std::vector<TraceEvent>& last_trace() const { return trace_; }

  // `p.buffers[].data` are device pointers. Launches and waits for the result.
  Status run(ParamsOf<MK> p, const Options& o) {
    EVT_RETURN_IF_ERROR(enqueue(p, o));
    return finish();
  }

  // Launches without waiting (benchmarks time the stream around this); finish() then waits
  // and reports the launch's error record.
  Status enqueue(ParamsOf<MK> p, const Options& o) {
    EVT_RETURN_IF_ERROR(check_schedule<MK>(o.schedule, o.early_push));
    if (o.cuda_graph && o.schedule != kKernels) return error("CUDA graphs capture the kernels mode only");
    if (o.bucket_dim >= 0) {
      EVT_ASSIGN_OR_RETURN(p, padded_to_bucket(p, o));
    }
    if (o.trace && o.cuda_graph) return error("tracing covers the launches, not CUDA-graph replays");
    const int blocks = o.blocks > 0 ? o.blocks : sms_;
    // A trace has a record per block: the kernels mode's launches use up to every co-resident one.
    const int trace_workers = o.schedule == kKernels ? max_coresident_blocks() : blocks;
    // Spinning blocks deadlock unless every block of the grid is resident at once.
    if (blocks > max_coresident_blocks()) {
      return error("a grid of {} blocks cannot be co-resident: at most {} ({} SMs x {} blocks)", blocks,
                   max_coresident_blocks(), sms_, blocks_per_sm_);
    }
    const Footprint<MK> f(p);
    // Both arenas hold any binding seen so far; new memory is zero, as after a finished launch.
    // Captured graphs point into the arenas, so growing them drops the graphs.
    if (f.words > words_) drop_graphs();
    for (auto& arena : arenas_) EVT_RETURN_IF_ERROR(arena.reserve(static_cast<size_t>(f.words)));
    words_ = std::max(words_, f.words);
    // The live arena is the one the last launch zeroed; a graph replays into the arena it was
    // captured with (it clears that first) and zeroes the other.
    const int live_arena = clean_arena_;
    uint64_t* live = arenas_[live_arena].data();
    uint64_t* next = arenas_[1 - live_arena].data();
    LaunchArgs a = f.bind(p, live, next, words_, o.spin_limit_ns, o.early_push);
    a.scratch_bytes = o.scratch_bytes;
    a.ring_stages = o.ring_stages;
    if (o.trace) {
      const size_t words = static_cast<size_t>(trace_workers) * (1 + kTraceWords * static_cast<size_t>(f.tasks));
      EVT_RETURN_IF_ERROR(trace_words_.reserve(words));
      EVT_CUDA_RETURN(cudaMemsetAsync(trace_words_.data(), 0, words * sizeof(uint64_t), o.stream));
      a.trace = trace_words_.data();
      a.trace_tasks_per_worker = f.tasks;
    }
    last_capture_ms_ = 0;
    (void)cudaGetLastError();  // the launches below report their own errors, not an earlier call's
    if (o.schedule != kKernels) {
      EVT_CUDA_RETURN(CudaLaunch<MK>::launch(p, a, blocks, o.schedule, o.wide_passes, o.stream));
    } else if (!o.cuda_graph) {
      EVT_RETURN_IF_ERROR(launch_groups(p, a, o.stream));
    } else {
      // A replay runs with the arena baked into the graph's kernel arguments at capture.
      EVT_ASSIGN_OR_RETURN(const CapturedGraph* graph, captured(p, a, live_arena, o.stream));
      EVT_CUDA_RETURN(cudaGraphLaunch(graph->exec, o.stream));
      clean_arena_ = 1 - graph->live_arena;
      pending_launch_ = Launch{graph->params, graph->args, o, f.elements, blocks, trace_workers};
      return Status();
    }
    clean_arena_ = 1 - live_arena;
    pending_launch_ = Launch{p, a, o, f.elements, blocks, trace_workers};
    return Status();
  }

  Status finish() {
    const Launch& l = pending_launch_;
    EVT_CUDA_RETURN(cudaStreamSynchronize(l.options.stream));
    SchedulerState s;
    EVT_CUDA_RETURN(cudaMemcpy(&s, l.args.state, sizeof s, cudaMemcpyDeviceToHost));
    trace_.clear();
    if (l.args.trace) {
      std::vector<uint64_t> words(static_cast<size_t>(l.trace_workers) *
                                  (1 + kTraceWords * l.args.trace_tasks_per_worker));
      EVT_CUDA_RETURN(cudaMemcpy(words.data(), l.args.trace, words.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
      trace_ = decode_trace(words, l.trace_workers, l.args.trace_tasks_per_worker);
    }
    if (s.abort != 0) {
      // A failed launch leaves its arena dirty: clean it, since graphs replay into the same one.
      EVT_CUDA_RETURN(zero_now(l.args.state, sizeof(SchedulerState)));
      return Status::error(describe_failure<MK>(s.error));
    }
    return check_dynamic_completion<MK>(l.params, l.options.schedule, l.blocks, s, [&](int e) {
      std::vector<uint64_t> c(l.elements[e]);
      cudaMemcpy(c.data(), l.params.counters[e], c.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost);
      return c;
    });
  }

  // Enqueues the kernels mode: one launch per task group (and layer), in the static order.
  Status launch_groups(const ParamsOf<MK>& p, const LaunchArgs& a, cudaStream_t stream) {
    for (int64_t k = 0; k < MK::launches(p); ++k) {
      const int64_t tiles = MK::launch_tiles(p, k);
      if (tiles == 0) continue;
      const int blocks = static_cast<int>(std::min<int64_t>(tiles, max_coresident_blocks()));
      EVT_CUDA_RETURN(CudaLaunch<MK>::launch_kernel(p, a, k, blocks, stream));
    }
    return Status();
  }

 private:
  void drop_graphs() {
    for (auto& c : graphs_) cudaGraphExecDestroy(c.exec);
    graphs_.clear();
  }

  static Expected<ParamsOf<MK>> padded_to_bucket(ParamsOf<MK> p, const Options& o) {
    if (!o.cuda_graph || o.bucket_dim >= MK::num_dims || o.buckets.empty()) {
      return error("batch buckets need cuda_graph, a dim of the graph and at least one bucket");
    }
    const int64_t n = p.dims[o.bucket_dim];
    const auto bucket = std::lower_bound(o.buckets.begin(), o.buckets.end(), n);
    if (bucket == o.buckets.end()) {
      return error("{}={} is beyond the largest CUDA-graph bucket, {}", MK::dim_name(o.bucket_dim), n, o.buckets.back());
    }
    p.dims[o.bucket_dim] = *bucket;
    MK::shapes(p);  // buffer shapes and wait counts of the padded binding
    return p;
  }

  struct CapturedGraph {
    ParamsOf<MK> params;  // as bound to the arena at capture
    LaunchArgs args;
    int live_arena;       // the arena the replays run in
    cudaGraphExec_t exec;
  };

  // The graph for these parameters (dims and buffers), captured now if it is new.
  Expected<const CapturedGraph*> captured(const ParamsOf<MK>& p, const LaunchArgs& a, int live_arena,
                                          cudaStream_t stream) {
    for (const auto& c : graphs_) {
      if (std::memcmp(c.params.dims, p.dims, sizeof p.dims) == 0 &&
          std::memcmp(c.params.buffers, p.buffers, sizeof p.buffers) == 0) {
        return &c;
      }
    }
    if (stream == nullptr) return error("CUDA graph capture needs a stream other than the default one");
    const auto start = std::chrono::steady_clock::now();
    EVT_CUDA_RETURN(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    // Every replay reuses the captured arena, so the graph starts by clearing it.
    Status launched = cuda_status(
        cudaMemsetAsync(a.state, 0, static_cast<size_t>(words_) * sizeof(uint64_t), stream), "cudaMemsetAsync");
    if (launched.ok()) launched = launch_groups(p, a, stream);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    EVT_RETURN_IF_ERROR(launched);
    EVT_CUDA_RETURN(ended);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    EVT_CUDA_RETURN(made);
    last_capture_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    graphs_.push_back({p, a, live_arena, exec});
    return &graphs_.back();
  }

  struct Launch {
    ParamsOf<MK> params;
    LaunchArgs args;
    Options options;
    std::vector<int64_t> elements;
    int blocks = 0;
    int trace_workers = 0;
  };

  CudaMegakernel() = default;
  Launch pending_launch_{};
  std::vector<CapturedGraph> graphs_;
  double last_capture_ms_ = 0;
  int sms_ = 0, blocks_per_sm_ = 0;
  DeviceWords arenas_[2];
  DeviceWords trace_words_;
  std::vector<TraceEvent> trace_;
  int64_t words_ = 0;
  int clean_arena_ = 0;  // zeroed, and so the next launch's live arena
};

}  // namespace evt::mk
