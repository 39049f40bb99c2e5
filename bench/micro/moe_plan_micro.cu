// Microbenchmark of the MoE block's per-layer plan task (kernels/llm/moe_plan.h) on its own: the
// body on one block of the decode megakernel's 480 consumer threads, Qwen3-30B-A3B's routing
// (128 experts, top-8) for T tokens of random logits, timed inside the kernel (median of 50
// launches, the rest of the GPU idle), and each phase between its block barriers, as the
// megakernel's trace notes them. Also its routing alone, and two ways for one thread to notify
// 128 event elements, as the plan's leader does: a release fence before each add, or one fence and
// then relaxed adds. Compare with the plan's work in a decode trace to see what the
// megakernel adds around the same body; the body once more beside a warp that spins on a shared
// word, as a megakernel block's loader warp does while it waits for the leader's announcement;
// and once more while every other SM streams from DRAM, as the megakernel's other SMs stream the
// next tasks' weights while a layer's plan runs (a dependent load's round trip grows ~10x then:
// bench/README.md, "The latency stages").
//   evt_moe_plan_micro [T ...]   (default 1 8 32 128); one JSON object per line, then a table.

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda_check.h"
#include "kernels/llm/moe_plan.h"

namespace {

using evt::kernels::DevBuffer;
using evt::kernels::Scratch;
namespace llm = evt::kernels::llm;

constexpr int kConsumers = 480, kThreads = 512;  // the decode block's consumers, and its loader warp
constexpr int64_t kExperts = 128, kTopK = 8, kHidden = 2048, kInter = 768;
constexpr int64_t kScratch = 200 * 1024;
constexpr int kNotified = 128;  // EXP elements of one layer
constexpr int kMarks = 16;      // a body's barrier times, and their count

enum Mode { kPlan, kPlanBesideSpinner, kPlanBesideStream, kRoute, kFencedAdds, kOneFenceAdds, kModes };
const char* mode_name(int m) {
  const char* names[] = {"moe_plan body", "body, a warp spinning", "body, other SMs streaming", "routing alone",
                         "128 adds, a fence each", "128 adds after one fence"};
  return names[m];
}

// The tile-body block of the consumer threads: named barrier 1, as the megakernel's workers.
// Its thread 0 notes the time after each barrier in `marks` (its count first), as the
// megakernel's trace notes a body's phases.
struct Block {
  unsigned char* smem;
  uint64_t* counts;
  uint64_t* marks;
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int threads() const { return kConsumers; }
  __device__ void sync() const {
    asm volatile("bar.sync 1, %0;" ::"r"(kConsumers) : "memory");
    if (threadIdx.x == 0 && marks[0] + 1 < kMarks) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(marks[1 + marks[0]++]));
  }
  __device__ Scratch scratch() const { return Scratch{smem, kScratch}; }
  __device__ void set_wait_count(int set, int64_t element, int64_t count) const {
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(counts[set * 1024 + element])
        .store(static_cast<uint64_t>(count) + 1, cuda::memory_order_relaxed);
  }
};

// The streaming blocks of kPlanBesideStream (every block but 0): each reads its slice of `data`
// with 16-byte loads, eight in flight per thread, until block 0 raises `stop` or the slice ends.
// `started` counts the blocks that began, so block 0 times the body only once all stream.
struct Stream {
  const uint4* data;
  int64_t slice;  // uint4 per block
  uint32_t* started;
  uint32_t* stop;
  uint32_t* sink;
};

__device__ void stream_until_stopped(const Stream& s) {
  if (threadIdx.x == 0) atomicAdd(s.started, 1);
  const uint4* mine = s.data + (blockIdx.x - 1) * s.slice;
  cuda::atomic_ref<uint32_t, cuda::thread_scope_device> stop(*s.stop);
  uint32_t acc = 0;
  for (int64_t i = threadIdx.x; i + 7 * kThreads < s.slice; i += 8 * kThreads) {
    if (stop.load(cuda::memory_order_relaxed) != 0) break;
    uint4 v[8];
    for (int u = 0; u < 8; ++u) v[u] = __ldcs(mine + i + u * kThreads);
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x9e3779b9u) *s.sink = acc;  // practically never: keeps the loads alive
}

__global__ void __launch_bounds__(kThreads, 1)
    plan_kernel(const DevBuffer* reads, const DevBuffer* writes, uint64_t* counts, int mode, uint64_t* ns, uint64_t* marks,
                Stream st) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (blockIdx.x > 0) {
    stream_until_stopped(st);
    return;
  }
  if (mode == kPlanBesideStream && threadIdx.x == 0) {
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device> started(*st.started);
    for (int i = 0; i < (1 << 24) && started.load(cuda::memory_order_relaxed) + 1 < gridDim.x; ++i) {
    }
  }
  __shared__ uint32_t body_done;
  if (threadIdx.x == 0) body_done = 0;
  __syncthreads();
  if (threadIdx.x >= kConsumers) {
    // The loader warp of a megakernel block, waiting for the leader to announce a task whose
    // weights depend on data: a spin on a shared-memory word (CudaWorker::next_announced).
    if (mode == kPlanBesideSpinner) {
      cuda::atomic_ref<uint32_t, cuda::thread_scope_block> done(body_done);
      while (done.load(cuda::memory_order_acquire) == 0) {
      }
    }
    return;
  }
  const Block b{smem, counts, marks};
  const int64_t tile[1] = {0};
  b.sync();
  uint64_t t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  if (threadIdx.x == 0) {  // the body's marks start at t0 (the barrier above noted one too)
    marks[0] = 1;
    marks[1] = t0;
  }
  if (mode == kPlan || mode == kPlanBesideSpinner || mode == kPlanBesideStream) {
    llm::moe_plan_body(b, tile, reads, writes);
  } else if (mode == kRoute) {
    const DevBuffer& logits = reads[3];
    llm::moe_route_tokens(b, logits.as<const float>(), logits.dim(1), logits.dim(0), kExperts, kTopK, true,
                          writes[0].as<int32_t>(), writes[1].as<float>(), kTopK, smem, nullptr, nullptr);
  } else if (threadIdx.x == 0) {
    uint64_t* counter = counts + 4096;
    if (mode == kOneFenceAdds) cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
    for (int e = 0; e < kNotified; ++e) {
      if (mode == kFencedAdds) cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device);
      cuda::atomic_ref<uint64_t, cuda::thread_scope_device>(counter[e * 8]).fetch_add(1, cuda::memory_order_relaxed);
    }
  }
  b.sync();
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  if (threadIdx.x == 0) {
    *ns = t1 - t0;
    cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*st.stop).store(1, cuda::memory_order_relaxed);
    cuda::atomic_ref<uint32_t, cuda::thread_scope_block>(body_done).store(1, cuda::memory_order_release);
  }
}

// A device copy of `bytes` at `data` (zeros when data is null), as a buffer of `shape`.
DevBuffer device_buffer(const void* data, size_t elem, std::vector<int64_t> shape) {
  DevBuffer d;
  d.rank = static_cast<int>(shape.size());
  d.numel = 1;
  for (int k = 0; k < d.rank; ++k) d.numel *= (d.shape[k] = shape[static_cast<size_t>(k)]);
  const size_t bytes = std::max<size_t>(static_cast<size_t>(d.numel) * elem, 4);
  CHECK(cudaMalloc(&d.data, bytes));
  if (data != nullptr) {
    CHECK(cudaMemcpy(d.data, data, bytes, cudaMemcpyHostToDevice));
  } else {
    CHECK(cudaMemset(d.data, 0, bytes));
  }
  return d;
}

// Each mode's median microseconds for T tokens, and its first launch's (the process's first
// launch of the body runs its code and data cold).
struct Timing {
  double median_us, first_us;
  std::vector<double> phases_us;  // median time between the body's barriers
};
std::vector<Timing> measure(int64_t tokens, void* weights, Stream stream, int sms) {
  std::vector<int32_t> cfg(llm::kCfgWords, 0);
  cfg[llm::kCfgMoeExperts] = kExperts;
  cfg[llm::kCfgMoeTopK] = kTopK;
  cfg[llm::kCfgMoeInter] = kInter;
  cfg[llm::kCfgMoeNormTopk] = 1;
  cfg[llm::kCfgMoeRowsXI] = 48;  // the decode's tiling of 30B-A3B: 16 gate/up tiles an expert
  cfg[llm::kCfgMoeRowsDn] = 128;
  cfg[llm::kCfgMoeRowsE] = 16;
  std::vector<int64_t> wtab(llm::kWeightColumns, 0);  // the plan reads only whether the router is there
  wtab[llm::kWrouter] = wtab[llm::kWexpertsGateUp] = wtab[llm::kWexpertsDown] = reinterpret_cast<int64_t>(weights);
  std::vector<float> logits(static_cast<size_t>(tokens * kExperts));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  for (float& v : logits) v = normal(rng);
  const int64_t rows = tokens * kTopK, max_gu = std::min(kExperts, rows) * 16;
  const DevBuffer reads[4] = {device_buffer(cfg.data(), 4, {llm::kCfgWords}),
                              device_buffer(wtab.data(), 8, {1, llm::kWeightColumns}),
                              device_buffer(nullptr, 4, {tokens, kHidden}), device_buffer(logits.data(), 4, {tokens, kExperts})};
  const DevBuffer writes[9] = {
      device_buffer(nullptr, 4, {tokens, kTopK}),    device_buffer(nullptr, 4, {tokens, kTopK}),
      device_buffer(nullptr, 4, {kExperts + 1}),     device_buffer(nullptr, 4, {rows}),
      device_buffer(nullptr, 4, {rows}),             device_buffer(nullptr, 4, {tokens, kTopK}),
      device_buffer(nullptr, 4, {1, kExperts + 1}),  device_buffer(nullptr, 4, {1, kExperts + 1}),
      device_buffer(nullptr, 4, {1, max_gu, llm::kTileEntryWords})};
  const DevBuffer* d_reads = static_cast<const DevBuffer*>(device_buffer(reads, sizeof reads, {1}).data);
  const DevBuffer* d_writes = static_cast<const DevBuffer*>(device_buffer(writes, sizeof writes, {1}).data);
  const DevBuffer counts = device_buffer(nullptr, 8, {8 * 1024}), ns = device_buffer(nullptr, 8, {1});
  const DevBuffer marks = device_buffer(nullptr, 8, {kMarks});
  std::vector<Timing> timings;
  for (int mode = 0; mode < kModes; ++mode) {
    std::vector<double> us;
    std::vector<std::vector<double>> phases;
    double first = 0;
    for (int i = 0; i < 60; ++i) {
      CHECK(cudaMemset(stream.started, 0, 8));  // started and stop
      plan_kernel<<<mode == kPlanBesideStream ? sms : 1, kThreads, kScratch>>>(d_reads, d_writes, counts.as<uint64_t>(),
                                                                            mode, ns.as<uint64_t>(), marks.as<uint64_t>(),
                                                                            stream);
      CHECK(cudaGetLastError());
      uint64_t v = 0, m[kMarks];
      CHECK(cudaMemcpy(&v, ns.data, 8, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(m, marks.data, sizeof m, cudaMemcpyDeviceToHost));
      if (i == 0) first = static_cast<double>(v) / 1e3;
      if (i < 10) continue;
      us.push_back(static_cast<double>(v) / 1e3);
      phases.resize(std::max<size_t>(phases.size(), m[0] - 1));
      for (uint64_t k = 1; k + 1 <= m[0]; ++k) phases[k - 1].push_back(static_cast<double>(m[k + 1] - m[k]) / 1e3);
    }
    std::sort(us.begin(), us.end());
    std::vector<double> phase_us;
    for (std::vector<double>& p : phases) {
      std::sort(p.begin(), p.end());
      phase_us.push_back(p[p.size() / 2]);
    }
    timings.push_back({us[us.size() / 2], first, phase_us});
  }
  for (const DevBuffer& d : reads) CHECK(cudaFree(d.data));
  for (const DevBuffer& d : writes) CHECK(cudaFree(d.data));
  CHECK(cudaFree(const_cast<DevBuffer*>(d_reads)));
  CHECK(cudaFree(const_cast<DevBuffer*>(d_writes)));
  CHECK(cudaFree(counts.data));
  CHECK(cudaFree(ns.data));
  CHECK(cudaFree(marks.data));
  return timings;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> token_counts;
  for (int i = 1; i < argc; ++i) token_counts.push_back(std::atoll(argv[i]));
  if (token_counts.empty()) token_counts = {1, 8, 32, 128};
  CHECK(cudaFuncSetAttribute(plan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kScratch)));
  void* weights = nullptr;  // any address: the plan never reads the weights
  CHECK(cudaMalloc(&weights, 256));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // 4 GiB to stream, far more than the other SMs read in one body's time; one block per SM.
  const int64_t stream_bytes = int64_t{4} << 30;
  Stream stream{};
  stream.slice = stream_bytes / 16 / (sms - 1);
  CHECK(cudaMalloc(const_cast<uint4**>(&stream.data), stream_bytes));
  CHECK(cudaMemset(const_cast<uint4*>(stream.data), 0x5a, stream_bytes));
  CHECK(cudaMalloc(&stream.started, 16));
  stream.stop = stream.started + 1;
  stream.sink = stream.started + 2;
  std::vector<std::vector<Timing>> table;
  for (const int64_t t : token_counts) {
    if (t < 1 || t > 4096) {
      std::fprintf(stderr, "token counts must be 1..4096, not %lld\n", static_cast<long long>(t));
      return 2;
    }
    table.push_back(measure(t, weights, stream, sms));
    for (int m = 0; m < kModes; ++m) {
      const Timing& x = table.back()[static_cast<size_t>(m)];
      std::printf("{\"bench\": \"moe_plan\", \"tokens\": %lld, \"mode\": \"%s\", \"median_us\": %.3f, \"first_launch_us\": %.3f, "
                  "\"phases_us\": [",
                  static_cast<long long>(t), mode_name(m), x.median_us, x.first_us);
      for (size_t k = 0; k < x.phases_us.size(); ++k) std::printf("%s%.3f", k ? ", " : "", x.phases_us[k]);
      std::printf("]}\n");
    }
  }
  std::printf("\n%-28s", "median us, T =");
  for (const int64_t t : token_counts) std::printf("%10lld", static_cast<long long>(t));
  std::printf("\n");
  for (int m = 0; m < kModes; ++m) {
    std::printf("%-28s", mode_name(m));
    for (const std::vector<Timing>& row : table) std::printf("%10.2f", row[static_cast<size_t>(m)].median_us);
    std::printf("\n");
  }
  CHECK(cudaFree(weights));
  CHECK(cudaFree(const_cast<uint4*>(stream.data)));
  CHECK(cudaFree(stream.started));
  return 0;
}
