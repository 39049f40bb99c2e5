// `eventide bench sched`: the scheduler's own costs on the GPU, from the graphs in bench/graphs
// compiled into the binary. Every figure is the median of device-timed launches (CUDA events
// around the launch only), after warm-up.
//   (a) per-task overhead with empty tiles: static vs dynamic, at one block per SM;
//   (b) a chain of 100 dependent steps: megakernel vs 100 kernel launches vs a CUDA graph of them;
//       with one tile per step, the time per step is the dependent-hop latency;
//   (c) two independent branches: they overlap in the megakernel and serialize as kernels;
//   and the host's per-binding set-up for 10^4 tiles.

#include "cli/bench_sched.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <vector>

#ifdef EVT_HAVE_CUDA
#include "cli/stats.h"
#include "megakernels/branches.h"
#include "megakernels/chain100.h"
#include "megakernels/hops100.h"
#include "megakernels/sched_fanin.h"
#include "megakernels/sched_independent.h"
#include "runtime/megakernel/cuda_instance.h"
#include "runtime/megakernel/trace.h"
#endif

namespace evt::cli {

namespace {

struct BenchOptions {
  int reps = 50;
  std::string json;
  std::string commit = "unknown";
  std::string trace;  // prefix of Chrome trace files, one per megakernel case; empty: no traces
};

#ifdef EVT_HAVE_CUDA

struct Mode {
  const char* name;
  mk::Schedule schedule;
  bool cuda_graph = false;
  bool early_push = false;
};
constexpr Mode kMegakernelStatic{"megakernel static", mk::kStatic};
constexpr Mode kMegakernelDynamic{"megakernel dynamic", mk::kDynamic};
constexpr Mode kMegakernelEarly{"megakernel early", mk::kDynamic, false, true};  // dynamic, early push
constexpr Mode kKernels{"kernels", mk::kKernels};
constexpr Mode kGraphs{"cuda graph", mk::kKernels, true};
constexpr Mode kAllModes[] = {kMegakernelStatic, kMegakernelDynamic, kMegakernelEarly, kKernels, kGraphs};

struct Row {
  std::string graph;
  std::string binding;
  std::string mode;
  int64_t tasks;
  double median_us;
  std::string per;  // what `value` means
  double value;
  double capture_ms;
};

// Buffers of `MK` for one binding, on the device, filled with a non-zero pattern.
template <class MK>
class Workspace {
 public:
  Expected<mk::ParamsOf<MK>> prepare(std::span<const int64_t> dims) {
    std::vector<void*> none(MK::num_buffers, nullptr);
    EVT_ASSIGN_OR_RETURN(auto shapes, mk::make_params<MK>(dims, none));
    std::vector<void*> pointers;
    for (int b = 0; b < MK::num_buffers; ++b) {
      const size_t bytes = std::max<int64_t>(shapes.buffers[b].numel, 1) * sizeof(float);
      void* d = nullptr;
      EVT_CUDA_RETURN(cudaMalloc(&d, bytes));
      std::vector<float> fill(bytes / sizeof(float));
      for (size_t i = 0; i < fill.size(); ++i) fill[i] = 1.0f + static_cast<float>(i % 7) * 0.25f;
      EVT_CUDA_RETURN(cudaMemcpy(d, fill.data(), bytes, cudaMemcpyHostToDevice));
      owned_.push_back(d);
      pointers.push_back(d);
    }
    return mk::make_params<MK>(dims, pointers);
  }
  ~Workspace() {
    for (void* d : owned_) cudaFree(d);
  }

 private:
  std::vector<void*> owned_;
};

template <class MK>
Expected<Row> measure(const std::string& graph, std::span<const int64_t> dims, const std::string& binding,
                      const Mode& mode, int reps, cudaStream_t stream, const std::string& trace_prefix) {
  EVT_ASSIGN_OR_RETURN(auto kernel, mk::CudaMegakernel<MK>::create());
  Workspace<MK> ws;
  EVT_ASSIGN_OR_RETURN(auto params, ws.prepare(dims));
  const typename mk::CudaMegakernel<MK>::Options options{
      .schedule = mode.schedule, .early_push = mode.early_push, .cuda_graph = mode.cuda_graph, .stream = stream};
  double capture_ms = 0;
  for (int w = 0; w < 3; ++w) {  // warm-up; the first graph run captures
    EVT_RETURN_IF_ERROR(kernel->enqueue(params, options));
    if (w == 0) capture_ms = kernel->last_capture_ms();
    EVT_RETURN_IF_ERROR(kernel->finish());
  }
  cudaEvent_t start, stop;
  EVT_CUDA_RETURN(cudaEventCreate(&start));
  EVT_CUDA_RETURN(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    EVT_CUDA_RETURN(cudaEventRecord(start, stream));
    EVT_RETURN_IF_ERROR(kernel->enqueue(params, options));
    EVT_CUDA_RETURN(cudaEventRecord(stop, stream));
    EVT_RETURN_IF_ERROR(kernel->finish());
    float ms = 0;
    EVT_CUDA_RETURN(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(ms * 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!trace_prefix.empty() && mode.schedule != mk::kKernels) {  // one more launch, traced, untimed
    auto traced = options;
    traced.trace = true;
    EVT_RETURN_IF_ERROR(kernel->run(params, traced));
    std::string file = fmt::format("{}-{}-{}-{}.json", trace_prefix, graph, binding, mode.name);
    std::replace(file.begin(), file.end(), ' ', '_');
    EVT_RETURN_IF_ERROR(mk::write_chrome_trace(file, kernel->last_trace(), [&](int g, int64_t linear) {
      return MK::task_name(params, g, linear);
    }));
  }
  return Row{graph, binding, mode.name, MK::tasks(params), median(us), "", 0, capture_ms};
}

// Host time to set a binding up: parameters and scheduler sizes, no device work.
template <class MK>
double setup_us(std::span<const int64_t> dims) {
  std::vector<void*> none(MK::num_buffers, nullptr);
  std::vector<double> us;
  for (int r = 0; r < 1000; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto p = mk::make_params<MK>(dims, none);
    const mk::Footprint<MK> f(*p);
    const auto t1 = std::chrono::steady_clock::now();
    if (f.tasks < 0) return -1;  // keeps the work observable
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return median(us);
}

Status run_bench(const BenchOptions& o) {
  int device = 0;
  cudaDeviceProp prop{};
  EVT_CUDA_RETURN(cudaGetDevice(&device));
  EVT_CUDA_RETURN(cudaGetDeviceProperties(&prop, device));
  cudaStream_t stream;
  EVT_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<Row> rows;
  auto add = [&](Expected<Row> r, const std::string& per, double divisor, double scale = 1) -> Status {
    if (!r.ok()) return r.status();
    r->per = per;
    r->value = r->median_us * 1e3 / divisor * scale;
    rows.push_back(*r);
    return Status();
  };

  // (a) per-task overhead, empty tiles, one block per SM.
  const int64_t n = 64 * prop.multiProcessorCount;
  const int64_t nd[] = {n};
  const std::string nb = fmt::format("N={}", n);
  using Independent = generated::sched_independent::Megakernel;
  using Fanin = generated::sched_fanin::Megakernel;
  for (const Mode& m : {kMegakernelStatic, kMegakernelDynamic}) {
    EVT_RETURN_IF_ERROR(add(measure<Independent>("sched_independent", nd, nb, m, o.reps, stream, o.trace),
                            "ns per task per SM", static_cast<double>(n), prop.multiProcessorCount));
    EVT_RETURN_IF_ERROR(add(measure<Fanin>("sched_fanin", nd, nb, m, o.reps, stream, o.trace), "ns per task per SM",
                            static_cast<double>(n * 5), prop.multiProcessorCount));
  }
  // (b) dependent hops: 100 steps of one empty tile; then the chain of 100 small steps with one
  // tile per step and one tile per SM per step.
  using Hops = generated::hops100::Megakernel;
  const int64_t one[] = {1};
  for (const Mode& m : kAllModes) {
    EVT_RETURN_IF_ERROR(add(measure<Hops>("hops100", one, "T=1", m, o.reps, stream, o.trace), "ns per hop", 100));
  }
  using Chain = generated::chain100::Megakernel;
  for (int64_t t : {int64_t{1}, int64_t{prop.multiProcessorCount}}) {
    const int64_t td[] = {t};
    for (const Mode& m : kAllModes) {
      EVT_RETURN_IF_ERROR(add(measure<Chain>("chain100", td, fmt::format("T={}", t), m, o.reps, stream, o.trace),
                              "ns per step", 100));
    }
  }
  // (c) two independent branches of 20 steps, 8 tiles each.
  using Branches = generated::branches::Megakernel;
  const int64_t bd[] = {8};
  for (const Mode& m : kAllModes) {
    EVT_RETURN_IF_ERROR(add(measure<Branches>("branches", bd, "T=8", m, o.reps, stream, o.trace), "ns per step", 40));
  }
  cudaStreamDestroy(stream);

  const int64_t setup_dims[] = {10000};
  const double setup = setup_us<Independent>(setup_dims);

  fmt::print("device: {} ({} SMs); medians of {} launches\n", prop.name, prop.multiProcessorCount, o.reps);
  fmt::print("{:<18} {:<8} {:<19} {:>7} {:>11} {:>14} {}\n", "graph", "binding", "mode", "tasks", "median us", "value",
             "");
  nlohmann::json results = nlohmann::json::array();
  for (const Row& r : rows) {
    fmt::print("{:<18} {:<8} {:<19} {:>7} {:>11.2f} {:>14.1f} {}{}\n", r.graph, r.binding, r.mode, r.tasks, r.median_us,
               r.value, r.per, r.capture_ms > 0 ? fmt::format(" (capture {:.2f} ms)", r.capture_ms) : "");
    results.push_back({{"graph", r.graph}, {"binding", r.binding}, {"mode", r.mode}, {"tasks", r.tasks},
                       {"median_us", r.median_us}, {"metric", r.per}, {"value", r.value},
                       {"capture_ms", r.capture_ms}});
  }
  fmt::print("per-binding host set-up for 10^4 tiles (sched_independent N=10000): {:.2f} us\n", setup);
  if (!o.json.empty()) {
    nlohmann::json j{{"benchmark", "eventide bench sched"},
                     {"device", fmt::format("{} ({} SMs)", prop.name, prop.multiProcessorCount)},
                     {"commit", o.commit},
                     {"command", fmt::format("eventide bench sched --reps {}", o.reps)},
                     {"reps", o.reps},
                     {"results", results},
                     {"setup_us_10k_tiles", setup}};
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return Status();
}

#else

Status run_bench(const BenchOptions&) {
  return error("this eventide was built without CUDA (nvcc was not found at build time)");
}

#endif

}  // namespace

void add_bench_sched_command(CLI::App& bench) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "sched", "Scheduler costs on the GPU: per-task overhead, dependent hops, chains and branches vs kernels and CUDA graphs");
  cmd->add_option("--reps", o->reps, "timed launches per measurement (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the results as JSON to this file");
  cmd->add_option("--commit", o->commit, "commit to record in the JSON");
  cmd->add_option("--trace", o->trace,
                  "also write a Chrome trace (Perfetto) of one launch per megakernel case, to PREFIX-<case>.json");
  cmd->callback([o] {
    Status s = run_bench(*o);
    if (!s.ok()) {
      fmt::print(stderr, "error: {}\n", s.message());
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace evt::cli
