// Whether asking the L2 for weights ahead of the weight ring keeps the memory busy across a decode
// step's dependency waits. A B = 1 step streams its weights only while a projection runs: during
// the hand-offs, first phases and the attention chain each SM's ring is full and the memory idles
// (bench/README.md: 8B spends ~47 of a 138 us layer so). Here one block per SM runs a layer's four
// projections as tasks, each a slice of weights per block behind a wait of its own (the consumers
// idle, as a task waits on its dependency), through the megakernel's ring (4 x 32 KiB, filled by
// the loader warp with bulk copies, evict-first). The loader asks the L2 for the chunk `ahead`
// chunks past each one it fills, in one of three ways:
//   - bulk:  lane 0, one cp.async.bulk.prefetch.L2 per chunk (the copy engine);
//   - lane0: lane 0, one prefetch.global.L2 per 128-byte line (256 per chunk);
//   - warp:  the loader warp's 32 lanes, 8 prefetch.global.L2 each per chunk.
// Each chunk is asked for once. The span of the layers, against the same layers with no prefetch
// and against no waits at all, says how much of the waits the L2 hides.
// Standalone: prints one JSON object per line, then a table. Results: bench/README.md.

#include <cuda/atomic>
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "stream_common.cuh"
#include "kernels/l2_policy.h"

namespace {

constexpr int kConsumerWarps = 11;  // the decode block's (kernels/llm/decode_config.h)
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kStages = 4;
constexpr int kChunk = 32768;
constexpr int kLine = 128;
constexpr int kMaxTasks = 64;

enum Ahead { kNone = 0, kBulk = 1, kLane0 = 2, kWarp = 3, kWarpLast = 4 };
const char* ahead_name(int m) {
  const char* names[] = {"none", "bulk", "lane0", "warp", "warpL"};
  return names[m];
}

// The tasks every block runs, in order: task t reads chunks[t] chunks of its own slice of region t
// after waiting wait_ns[t].
struct Plan {
  int tasks;
  int chunks[kMaxTasks];
  int64_t region[kMaxTasks];  // byte offset of task t's region (blocks' slices side by side)
  int64_t wait_ns[kMaxTasks];
};

// A walk over the block's chunks in the order the consumers read them.
struct Walk {
  const Plan* plan;
  const unsigned char* base;
  int task = 0, chunk = 0;
  __device__ bool done() const { return task >= plan->tasks; }
  __device__ const unsigned char* next() {
    const unsigned char* p = base + plan->region[task] + (int64_t{blockIdx.x} * plan->chunks[task] + chunk) * kChunk;
    if (++chunk == plan->chunks[task]) chunk = 0, ++task;
    return p;
  }
};

template <int kMode>
__device__ void ask_l2(const unsigned char* chunk, int lane) {
  if constexpr (kMode == kBulk) {
    if (lane == 0) {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(chunk), "r"(kChunk) : "memory");
    }
  } else if constexpr (kMode == kLane0) {
    if (lane == 0) {
      for (int at = 0; at < kChunk; at += kLine) asm volatile("prefetch.global.L2 [%0];" ::"l"(chunk + at));
    }
  } else if constexpr (kMode == kWarp) {
    for (int at = lane * kLine; at < kChunk; at += 32 * kLine) asm volatile("prefetch.global.L2 [%0];" ::"l"(chunk + at));
  } else if constexpr (kMode == kWarpLast) {
    for (int at = lane * kLine; at < kChunk; at += 32 * kLine) {
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(chunk + at));
    }
  }
}

// The loader warp: every lane walks the chunks (uniformly); lane 0 fills the ring, and the lanes
// ask the L2 for the chunk `ahead` past each one filled.
template <int kMode>
__device__ void loader(const Plan& plan, const unsigned char* base, unsigned char* ring, uint64_t* full,
                       uint64_t* empty, int ahead, int* failed) {
  const int lane = threadIdx.x % 32;
  const uint64_t policy = evt::kernels::evict_first_policy();
  Walk fill{&plan, base}, pre{&plan, base};
  for (int k = 0; k < ahead && !pre.done(); ++k) ask_l2<kMode>(pre.next(), lane);
  int64_t c = 0;
  for (; !fill.done(); ++c) {
    if (kMode != kNone && !pre.done()) ask_l2<kMode>(pre.next(), lane);
    const unsigned char* src = fill.next();
    const int s = static_cast<int>(c % kStages);
    if (c >= kStages && !wait_phase(&empty[s], static_cast<uint32_t>((c / kStages - 1) & 1), failed)) break;
    if (lane == 0) {
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &full[s], kChunk);
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
          "%4;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(ring + int64_t{s} * kChunk))),
          "l"(src), "r"(kChunk), "r"(static_cast<uint32_t>(__cvta_generic_to_shared(&full[s]))), "l"(policy)
          : "memory");
    }
    __syncwarp();
  }
  // Every copy must land before the block exits.
  for (int64_t k = c > kStages ? c - kStages : 0; k < c; ++k) {
    wait_phase(&full[k % kStages], static_cast<uint32_t>((k / kStages) & 1), failed);
  }
}

template <int kMode>
__global__ void __launch_bounds__(kThreads, 1)
    layers(const __grid_constant__ Plan plan, const unsigned char* base, int ahead, unsigned* arrived, uint64_t* stamps,
           float* sink, int* failed) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ uint64_t full[kStages], empty[kStages];
  const uint64_t start = now_ns();
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], kConsumerWarps);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x / 32 == kConsumerWarps) {
    loader<kMode>(plan, base, ring, full, empty, ahead, failed);
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t x = 0;
  int64_t c = 0;
  for (int t = 0; t < plan.tasks; ++t) {
    // The task's dependency wait, which every block meets at once (a hand-off): the leader
    // arrives at a grid barrier, then polls the clock; the others wait at the consumers' barrier.
    if (threadIdx.x == 0) {
      cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(*arrived);
      count.fetch_add(1, cuda::memory_order_release);
      const unsigned all = gridDim.x * (t + 1);
      for (uint32_t spins = 0; count.load(cuda::memory_order_acquire) < all; ++spins) {
        if (spins == kSpinLimit) {
          *failed = 1;
          break;
        }
      }
      const uint64_t t0 = now_ns();
      while (now_ns() - t0 < static_cast<uint64_t>(plan.wait_ns[t])) {
      }
    }
    asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
    for (int k = 0; k < plan.chunks[t]; ++k, ++c) {
      const int s = static_cast<int>(c % kStages);
      if (!wait_phase(&full[s], static_cast<uint32_t>((c / kStages) & 1), failed)) break;
      const unsigned char* data = ring + int64_t{s} * kChunk;
      for (int tile = warp; tile < kChunk / 1024; tile += kConsumerWarps) {
        const uint4 a = *reinterpret_cast<const uint4*>(data + tile * 1024 + lane * 16);
        const uint4 b = *reinterpret_cast<const uint4*>(data + tile * 1024 + 512 + lane * 16);
        x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
      }
      __syncwarp();
      if (lane == 0) cuda::ptx::mbarrier_arrive(&empty[s]);
    }
    asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(x);
  if (threadIdx.x == 0) {
    stamps[2 * blockIdx.x] = start;
    stamps[2 * blockIdx.x + 1] = now_ns();
  }
}

struct Device {
  int sms = 0;
  unsigned char* buffer = nullptr;
  int64_t buffer_bytes = int64_t{8} << 30;  // far past the L2: each rep reads a fresh region
  uint64_t* stamps = nullptr;
  unsigned* arrived = nullptr;  // the grid barrier's count, zeroed before each launch
  float* sink = nullptr;
  int* failed = nullptr;
};

// `layers` layers of projections with `kib` KiB per block each behind `wait_us`.
Plan make_plan(int sms, int layer_count, const std::vector<int>& kib, const std::vector<double>& wait_us,
               double wait_scale, int64_t* bytes) {
  Plan p{};
  int64_t at = 0;
  for (int l = 0; l < layer_count; ++l) {
    for (size_t i = 0; i < kib.size(); ++i) {
      const int t = p.tasks++;
      p.chunks[t] = kib[i] * 1024 / kChunk;
      p.region[t] = at;
      p.wait_ns[t] = static_cast<int64_t>(wait_us[i] * wait_scale * 1e3);
      at += int64_t{p.chunks[t]} * kChunk * sms;
    }
  }
  *bytes = at;
  return p;
}

template <int kMode>
double median_span_us(const Device& d, const Plan& plan, int64_t bytes, int ahead, int reps = 9) {
  const int smem = kStages * kChunk;
  CHECK(cudaFuncSetAttribute(layers<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  return median_launch_span_us(d.sms, d.stamps, d.buffer_bytes, bytes, reps, [&](int64_t offset) {
    CHECK(cudaMemset(d.arrived, 0, sizeof(unsigned)));
    layers<kMode><<<d.sms, kThreads, smem>>>(plan, d.buffer + offset, ahead, d.arrived, d.stamps, d.sink, d.failed);
  });
}

struct Row {
  char what[96];
  double us, base_us, nowait_us;
};
std::vector<Row> g_rows;

void run(const Device& d, const char* name, int layer_count, const std::vector<int>& kib,
         const std::vector<double>& wait_us) {
  int64_t bytes = 0;
  const Plan plan = make_plan(d.sms, layer_count, kib, wait_us, 1.0, &bytes);
  const Plan nowait = make_plan(d.sms, layer_count, kib, wait_us, 0.0, &bytes);
  const double flat = median_span_us<kNone>(d, nowait, bytes, 0);
  const double base = median_span_us<kNone>(d, plan, bytes, 0);
  double waits = 0;
  for (double w : wait_us) waits += w * layer_count;
  std::printf("{\"bench\": \"l2_ahead\", \"shape\": \"%s\", \"mb\": %.1f, \"waits_us\": %.1f, \"no_wait_us\": %.2f, "
              "\"no_prefetch_us\": %.2f}\n",
              name, bytes / 1e6, waits, flat, base);
  const double flat_ahead = median_span_us<kWarp>(d, nowait, bytes, 4);
  std::printf("{\"bench\": \"l2_ahead\", \"shape\": \"%s\", \"no_wait_warp_ahead_4_us\": %.2f}\n", name, flat_ahead);
  for (const int mode : {kBulk, kWarp, kWarpLast}) {
    for (const int ahead : {2, 4, 8, 16}) {
      double us = 0;
      switch (mode) {
        case kBulk: us = median_span_us<kBulk>(d, plan, bytes, ahead); break;
        case kWarp: us = median_span_us<kWarp>(d, plan, bytes, ahead); break;
        default: us = median_span_us<kWarpLast>(d, plan, bytes, ahead); break;
      }
      int failed = 0;
      CHECK(cudaMemcpy(&failed, d.failed, sizeof failed, cudaMemcpyDeviceToHost));
      std::printf("{\"bench\": \"l2_ahead\", \"shape\": \"%s\", \"mode\": \"%s\", \"ahead_chunks\": %d, \"span_us\": %.2f, "
                  "\"failed\": %d}\n",
                  name, ahead_name(mode), ahead, us, failed);
      Row row{};
      std::snprintf(row.what, sizeof row.what, "%s %-5s ahead %2d%s", name, ahead_name(mode), ahead,
                    failed ? " FAILED" : "");
      row.us = us;
      row.base_us = base;
      row.nowait_us = flat;
      g_rows.push_back(row);
    }
  }
}

}  // namespace

// With --profile: one launch each of the 8B layers with no look-ahead, and with the warp's and
// the copy engine's look-ahead of 4 chunks, for a profiler's counters (the DRAM bytes read).
void profile(const Device& d) {
  int64_t bytes = 0;
  const Plan plan = make_plan(d.sms, 4, {384, 256, 1536, 768}, {7, 25, 7, 7}, 1.0, &bytes);
  median_span_us<kNone>(d, plan, bytes, 0, 1);
  median_span_us<kWarp>(d, plan, bytes, 4, 1);
  median_span_us<kBulk>(d, plan, bytes, 4, 1);
}

int main(int argc, char** argv) {
  Device d;
  CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaMalloc(&d.buffer, d.buffer_bytes));
  CHECK(cudaMemset(d.buffer, 0x3c, d.buffer_bytes));
  CHECK(cudaMalloc(&d.stamps, 2 * 8 * d.sms));
  CHECK(cudaMalloc(&d.arrived, sizeof(unsigned)));
  CHECK(cudaMalloc(&d.sink, sizeof(float) * kThreads * d.sms));
  CHECK(cudaMalloc(&d.failed, sizeof(int)));
  CHECK(cudaMemset(d.failed, 0, sizeof(int)));
  if (argc > 1 && std::string(argv[1]) == "--profile") {
    profile(d);
    return 0;
  }

  // Per block: an 8B layer's qkv, o_proj, gate/up and down slices, and the waits before each that
  // a traced B = 1 step shows (the hand-offs ~7 us; o_proj behind the attention chain too).
  run(d, "8b", 4, {384, 256, 1536, 768}, {7, 25, 7, 7});
  // A 0.6B layer: the same waits, slices ~16x smaller.
  run(d, "0.6b", 8, {64, 32, 96, 64}, {7, 18, 7, 6});

  std::printf("\n%-32s %10s %10s %10s %8s\n", "layers (one block per SM)", "span us", "no ahead", "no waits", "hidden");
  for (const Row& r : g_rows) {
    // The share of what the waits cost (no ahead - no waits) the look-ahead took back.
    const double hidden = (r.base_us - r.us) / std::max(r.base_us - r.nowait_us, 1e-9);
    std::printf("%-32s %10.2f %10.2f %10.2f %7.0f%%\n", r.what, r.us, r.base_us, r.nowait_us, 100 * hidden);
  }
  return 0;
}
