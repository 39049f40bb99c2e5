// Microbenchmarks of the inter-SM synchronization primitives the megakernel is built from, to
// choose between them with measurements (H100/H200): one-way latency of a dependent hop between
// two SMs for several notify and wait flavours and block-barrier counts, a 132-SM fan-in
// (a grid-wide "all tiles of the step before" wait), and the latency of a returning atomic.
// Standalone: prints one JSON object per line, then a table.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kThreads = 128;
constexpr uint64_t kSpinLimit = 1ull << 26;  // polls before a wait gives up (never hang)

enum Notify { kFenceRed, kRedRelease, kAtomRelease, kThreadfenceAtomic, kStoreRelease };
enum Wait { kAcquireSleep, kAcquire, kRelaxedThenFence };
const char* notify_name(int n) {
  const char* names[] = {"fence.acq_rel+red.relaxed", "red.release", "atom.release", "__threadfence+atomicAdd",
                         "st.release"};
  return names[n];
}
const char* wait_name(int w) {
  const char* names[] = {"ld.acquire+nanosleep(32)", "ld.acquire", "ld.relaxed+fence"};
  return names[w];
}

template <int kNotify>
__device__ void notify(uint64_t* p, uint64_t value) {
  if constexpr (kNotify == kFenceRed) {
    asm volatile("fence.acq_rel.gpu;\n red.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(p) : "memory");
  } else if constexpr (kNotify == kRedRelease) {
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(p) : "memory");
  } else if constexpr (kNotify == kAtomRelease) {
    uint64_t old;
    asm volatile("atom.release.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(p) : "memory");
    if (old == ~0ull) *p = 0;  // keeps the returned value live
  } else if constexpr (kNotify == kThreadfenceAtomic) {
    __threadfence();
    atomicAdd(reinterpret_cast<unsigned long long*>(p), 1ull);
  } else {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(value) : "memory");
  }
}

template <int kWait>
__device__ bool wait_for(const uint64_t* p, uint64_t target) {
  for (uint64_t spins = 0; spins < kSpinLimit; ++spins) {
    uint64_t v;
    if constexpr (kWait == kRelaxedThenFence) {
      asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    } else {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    }
    if (v >= target) {
      if constexpr (kWait == kRelaxedThenFence) asm volatile("fence.acq_rel.gpu;" ::: "memory");
      return true;
    }
    if constexpr (kWait == kAcquireSleep) __nanosleep(32);
  }
  return false;
}

// Blocks 0 and gridDim/2 (on different SMs) pass a token back and forth `iters` times. Each
// step is a task: the leader waits, `kBarriers` block barriers, every thread stores a word when
// kWrite, the leader notifies.
template <int kNotify, int kWait, int kBarriers, bool kWrite>
__global__ void __launch_bounds__(kThreads, 1) pingpong(uint64_t* flags, float* scratch, int iters, int* failed) {
  const int side = blockIdx.x == 0 ? 0 : blockIdx.x == gridDim.x / 2 ? 1 : -1;
  if (side < 0) return;
  uint64_t* mine = flags + 32 * side;  // separate 256-byte lines
  uint64_t* theirs = flags + 32 * (1 - side);
  for (int i = 0; i < iters; ++i) {
    if (side == 1 || i > 0) {
      if (threadIdx.x == 0 && !wait_for<kWait>(theirs, static_cast<uint64_t>(side == 1 ? i + 1 : i))) *failed = 1;
    }
    for (int b = 0; b < kBarriers / 2; ++b) __syncthreads();
    if (kWrite) scratch[side * kThreads + threadIdx.x] = static_cast<float>(i);
    for (int b = kBarriers / 2; b < kBarriers; ++b) __syncthreads();
    if (threadIdx.x == 0) notify<kNotify>(mine, static_cast<uint64_t>(i + 1));
  }
}

// Every block arrives on round r's counter, then waits until all have: a grid-wide step.
// kFlag: the last arriver (seen from an atomic's return) sets a separate flag that the others
// poll, so the pollers do not contend with the arrivals on one line.
template <int kNotify, int kWait, bool kFlag>
__global__ void __launch_bounds__(kThreads, 1) fanin(uint64_t* counters, uint64_t* flags, int rounds, int* failed) {
  for (int r = 0; r < rounds; ++r) {
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t* c = counters + 32 * r;
      if constexpr (kFlag) {
        __threadfence();
        const uint64_t got = atomicAdd(reinterpret_cast<unsigned long long*>(c), 1ull) + 1;
        if (got == gridDim.x) notify<kStoreRelease>(flags + 32 * r, 1);
        if (!wait_for<kWait>(flags + 32 * r, 1)) *failed = 1;
      } else {
        notify<kNotify>(c, 0);
        if (!wait_for<kWait>(c, gridDim.x)) *failed = 1;
      }
    }
    __syncthreads();
  }
}

// One block's leader chains dependent returning atomics on one address.
__global__ void atomic_chain(uint64_t* p, int iters, uint64_t* sink) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  uint64_t acc = 0;
  for (int i = 0; i < iters; ++i) acc += atomicAdd(reinterpret_cast<unsigned long long*>(p + (acc & 1)), 1ull);
  *sink = acc;
}

int g_sms = 0;

template <class Launch>
float median_ms(Launch&& launch, uint64_t* words, size_t bytes, int reps = 21) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> times(reps);
  for (float& t : times) {
    CHECK(cudaMemset(words, 0, bytes));
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&t, a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::nth_element(times.begin(), times.begin() + reps / 2, times.end());
  return times[reps / 2];
}

struct Buffers {
  uint64_t* words;
  uint64_t* flags;
  float* scratch;
  int* failed;
};

template <int kNotify, int kWait, int kBarriers, bool kWrite>
void hop(const Buffers& m) {
  const int iters = 2000;
  const float ms = median_ms([&] { pingpong<kNotify, kWait, kBarriers, kWrite><<<g_sms, kThreads>>>(m.words, m.scratch, iters, m.failed); },
                             m.words, 4096);
  CHECK(cudaGetLastError());
  int failed = 0;
  CHECK(cudaMemcpy(&failed, m.failed, sizeof failed, cudaMemcpyDeviceToHost));
  std::printf("{\"bench\": \"hop\", \"notify\": \"%s\", \"wait\": \"%s\", \"barriers\": %d, \"block_writes\": %s, "
              "\"ns_per_hop\": %.1f, \"failed\": %d}\n",
              notify_name(kNotify), wait_name(kWait), kBarriers, kWrite ? "true" : "false", ms * 1e6 / (2.0 * iters),
              failed);
}

template <int kNotify, int kWait, bool kFlag>
void grid_step(const Buffers& m) {
  const int rounds = 100;
  const float ms = median_ms([&] { fanin<kNotify, kWait, kFlag><<<g_sms, kThreads>>>(m.words, m.flags, rounds, m.failed); },
                             m.words, 32 * 8 * 2 * rounds);
  CHECK(cudaGetLastError());
  int failed = 0;
  CHECK(cudaMemcpy(&failed, m.failed, sizeof failed, cudaMemcpyDeviceToHost));
  std::printf("{\"bench\": \"grid_step\", \"sms\": %d, \"notify\": \"%s\", \"wait\": \"%s\", \"last_sets_flag\": %s, "
              "\"ns_per_step\": %.1f, \"failed\": %d}\n",
              g_sms, kFlag ? "__threadfence+atomicAdd" : notify_name(kNotify), wait_name(kWait), kFlag ? "true" : "false",
              ms * 1e6 / rounds, failed);
}

}  // namespace

int main() {
  CHECK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
  Buffers m;
  CHECK(cudaMalloc(&m.words, 1 << 20));
  m.flags = m.words + (1 << 16);
  CHECK(cudaMalloc(&m.scratch, 1 << 16));
  CHECK(cudaMalloc(&m.failed, sizeof(int)));
  CHECK(cudaMemset(m.failed, 0, sizeof(int)));

  // Notify flavours, with the current wait and the two barriers a task needs at least.
  hop<kFenceRed, kAcquireSleep, 2, false>(m);
  hop<kRedRelease, kAcquireSleep, 2, false>(m);
  hop<kAtomRelease, kAcquireSleep, 2, false>(m);
  hop<kThreadfenceAtomic, kAcquireSleep, 2, false>(m);
  hop<kStoreRelease, kAcquireSleep, 2, false>(m);
  // Wait flavours.
  hop<kFenceRed, kAcquire, 2, false>(m);
  hop<kFenceRed, kRelaxedThenFence, 2, false>(m);
  hop<kRedRelease, kAcquire, 2, false>(m);
  hop<kRedRelease, kRelaxedThenFence, 2, false>(m);
  // Barrier counts: none (the flag floor), two, five (the generated run_task today).
  hop<kFenceRed, kAcquireSleep, 0, false>(m);
  hop<kRedRelease, kAcquire, 0, false>(m);
  hop<kFenceRed, kAcquireSleep, 5, false>(m);
  hop<kRedRelease, kAcquire, 5, false>(m);
  // With every thread writing before the notify (the fence then has stores to wait for).
  hop<kFenceRed, kAcquireSleep, 2, true>(m);
  hop<kRedRelease, kAcquire, 2, true>(m);
  hop<kRedRelease, kAcquireSleep, 2, true>(m);

  grid_step<kFenceRed, kAcquireSleep, false>(m);
  grid_step<kRedRelease, kAcquireSleep, false>(m);
  grid_step<kRedRelease, kAcquire, false>(m);
  grid_step<kFenceRed, kAcquireSleep, true>(m);
  grid_step<kFenceRed, kAcquire, true>(m);

  const int iters = 10000;
  const float ms = median_ms([&] { atomic_chain<<<1, 32>>>(m.words, iters, m.flags); }, m.words, 4096);
  std::printf("{\"bench\": \"returning_atomic\", \"ns_per_atomic\": %.1f}\n", ms * 1e6 / iters);
  return 0;
}
