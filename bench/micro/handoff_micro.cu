// What an all-to-all hand-off between two stages of a decode layer costs, and what it would cost
// with the flag in the data (NCCL's LL protocol) instead of a counter: a chain of stages in
// which every block (one per SM) writes its slice of a vector and then reads the whole vector
// into shared memory, as a projection's tiles write its output and the next projection's tiles
// stage all of it.
//   - counter: the block stores its slice, block barrier, release fence and a relaxed add on the
//     stage's counter (the megakernel's notify); the leader polls the counter with acquire loads
//     and 32 ns sleeps until every block arrived, block barrier, then every thread loads its
//     share of the vector (L2, 16-byte loads) into shared memory: three dependent trips to the
//     L2 after the last store (the fence's, the poll's, the load's).
//   - flag: every 8-byte word holds a 32-bit value and the stage's 32-bit flag (one store, so a
//     reader sees both or neither); each thread loads its share and loads again the words whose
//     flag is stale, then stores the values into shared memory. No fence, no counter, no barrier
//     before the loads: one trip after the last store, at twice the bytes.
// Each with the memory idle; with a loader warp per block streaming from DRAM through a 4 x 32
// KiB ring throughout; or with the loader filling the whole ring once as each stage begins, as
// the weight ring refills for the next task when a pass ends (the step's case). The loader keeps
// 4, 2 or 1 copies in flight. Every value read is checked: a poll that gives up leaves a stale
// value, counted in bad_values. Standalone: one JSON object per line.

#include <cuda/ptx>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "cuda_check.h"
#include "kernels/bulk_copy.h"
#include "kernels/l2_policy.h"
#include "stream_common.cuh"

namespace {

constexpr int kWarps = 12;  // the decode block's task warps (kernels/llm/decode_config.h)
constexpr int kConsumers = kWarps * 32;
constexpr int kStages = 4;
constexpr int kChunk = 32 * 1024;
constexpr int kMaxWords = 8192;  // 32-bit values of the largest vector (shared memory: 32 KiB)
constexpr uint32_t kPollLimit = 1u << 24;
enum Memory { kIdle = 0, kBurst = 1, kContinuous = 2 };
const char* memory_name(int m) {
  const char* names[] = {"idle", "burst", "continuous"};
  return names[m];
}

__device__ uint32_t value_of(int stage, int i) { return static_cast<uint32_t>(stage) * 1000003u + i; }

__device__ void consumer_sync() { asm volatile("bar.sync 1, %0;" ::"r"(kConsumers) : "memory"); }

// The loader warp's lane 0: streams the block's slice through the ring until the consumers set
// `stop`. Continuous: each stage refilled as soon as its copy landed. Burst: the whole ring
// (128 KiB) once each time the consumers start a stage (`bursts` rises), as the weight ring
// refills for the next task when a pass ends, just as its hand-off begins.
__device__ void stream(const unsigned char* slice, int64_t chunks, unsigned char* ring, uint64_t* full,
                       const volatile int* stop, const volatile int* bursts, bool burst, int in_flight, int* failed) {
  const uint64_t policy = evt::kernels::evict_first_policy();
  for (int s = 0; s < kStages; ++s) cuda::ptx::mbarrier_init(&full[s], 1);
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  int64_t c = 0;
  int done = 0;
  while (*stop == 0) {
    if (burst) {
      if (*bursts == done) continue;
      ++done;
    }
    for (int k = 0; k < (burst ? kStages : 1); ++k, ++c) {
      const int s = static_cast<int>(c % kStages);
      if (c >= kStages && !wait_phase(&full[s], static_cast<uint32_t>((c / kStages - 1) & 1), failed)) return;
      // At most `in_flight` copies outstanding: copy c waits for copy c - in_flight to land.
      const int64_t landed = c - in_flight;
      if (landed >= 0 &&
          !wait_phase(&full[landed % kStages], static_cast<uint32_t>((landed / kStages) & 1), failed)) {
        return;
      }
      evt::kernels::expect_copy_bytes(&full[s], kChunk);
      evt::kernels::copy_bulk(ring + s * kChunk, slice + (c % chunks) * kChunk, kChunk, &full[s], policy);
    }
  }
  // Every copy lands before the block exits.
  for (int64_t k = c > kStages ? c - kStages : 0; k < c; ++k) {
    wait_phase(&full[k % kStages], static_cast<uint32_t>((k / kStages) & 1), failed);
  }
}

template <bool kFlag>
__global__ void __launch_bounds__(kConsumers + 32, 1)
    chain(uint32_t* words, uint64_t* flagged, uint64_t* counters, int n, int stages, const unsigned char* src,
          int64_t chunks_per_block, int streaming, int in_flight, uint64_t* stamps, int* failed) {
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ uint64_t full[kStages];
  __shared__ uint32_t staged[kMaxWords];
  __shared__ int stop, bursts;
  if (threadIdx.x == 0) stop = bursts = 0;
  __syncthreads();
  if (threadIdx.x >= kConsumers) {
    if (streaming != kIdle && threadIdx.x == kConsumers) {
      stream(src + blockIdx.x * chunks_per_block * kChunk, chunks_per_block, ring, full, &stop, &bursts,
             streaming == kBurst, in_flight, failed);
    }
    return;
  }
  const uint64_t start = now_ns();
  const int blocks = static_cast<int>(gridDim.x);
  const int per = (n + blocks - 1) / blocks;
  const int lo = blockIdx.x * per, hi = min(n, lo + per);
  int bad = 0;
  for (int st = 0; st < stages; ++st) {
    const int buf = st % 2;  // a stage's buffer is written again two stages on, once every block read it
    if (threadIdx.x == 0) atomicAdd_block(&bursts, 1);    // the loader's cue, in burst mode
    if constexpr (kFlag) {
      uint64_t* v = flagged + buf * kMaxWords;
      const uint64_t flag = static_cast<uint64_t>(st + 1) << 32;
      for (int i = lo + threadIdx.x; i < hi; i += kConsumers) {
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(v + i), "l"(flag | value_of(st, i)) : "memory");
      }
      // Two words a load: 16 bytes, each 8-byte half read whole.
      for (int i = 2 * threadIdx.x; i < n; i += 2 * kConsumers) {
        uint64_t a = 0, b = 0;
        for (uint32_t polls = 0; polls < kPollLimit; ++polls) {
          asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(v + i) : "memory");
          const uint64_t want = static_cast<uint64_t>(st + 1);
          if ((a >> 32) == want && (i + 1 >= n || (b >> 32) == want)) break;
        }
        staged[i] = static_cast<uint32_t>(a);
        if (i + 1 < n) staged[i + 1] = static_cast<uint32_t>(b);
      }
      consumer_sync();
    } else {
      uint32_t* v = words + buf * kMaxWords;
      for (int i = lo + threadIdx.x; i < hi; i += kConsumers) v[i] = value_of(st, i);
      consumer_sync();
      if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;\n red.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(counters + 32 * st)
                     : "memory");
        uint64_t got = 0;
        for (uint32_t polls = 0; polls < kPollLimit; ++polls) {
          asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(got) : "l"(counters + 32 * st) : "memory");
          if (got >= static_cast<uint64_t>(blocks)) break;
          __nanosleep(32);
        }
      }
      consumer_sync();
      for (int i = 4 * threadIdx.x; i < n; i += 4 * kConsumers) {
        const uint4 q = __ldcg(reinterpret_cast<const uint4*>(v + i));
        staged[i] = q.x, staged[i + 1] = q.y, staged[i + 2] = q.z, staged[i + 3] = q.w;
      }
      consumer_sync();
    }
    for (int i = threadIdx.x; i < n; i += kConsumers) bad += staged[i] != value_of(st, i);
    consumer_sync();  // the stage's values are read before the next stage stages over them
  }
  if (bad != 0) atomicAdd(failed, bad);
  if (threadIdx.x == 0) {
    stamps[2 * blockIdx.x] = start;
    stamps[2 * blockIdx.x + 1] = now_ns();
    stop = 1;
  }
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int stages = 400;
  const int64_t chunks_per_block = 64;  // 2 MiB a block, 264 MiB in all: far past the L2
  uint32_t* words;
  uint64_t *flagged, *counters, *stamps;
  unsigned char* src;
  int* failed;
  CHECK(cudaMalloc(&words, 2 * kMaxWords * 4));
  CHECK(cudaMalloc(&flagged, 2 * kMaxWords * 8));
  CHECK(cudaMalloc(&counters, int64_t{stages} * 32 * 8));
  CHECK(cudaMalloc(&stamps, 2 * sms * 8));
  CHECK(cudaMalloc(&src, int64_t{sms} * chunks_per_block * kChunk));
  CHECK(cudaMalloc(&failed, 4));
  CHECK(cudaMemset(src, 1, int64_t{sms} * chunks_per_block * kChunk));
  const int smem = kStages * kChunk;
  CHECK(cudaFuncSetAttribute(chain<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(chain<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const auto measure = [&](int n, int streaming, int in_flight, bool flag) {
    CHECK(cudaMemset(failed, 0, 4));
    // Each launch reads the same slices: the offset the helper hands out is not used.
    const double span = median_launch_span_us(sms, stamps, 1 << 30, 1 << 20, 9, [&](int64_t) {
      CHECK(cudaMemset(counters, 0, int64_t{stages} * 32 * 8));
      CHECK(cudaMemset(flagged, 0, 2 * kMaxWords * 8));
      auto* kernel = flag ? chain<true> : chain<false>;
      kernel<<<sms, kConsumers + 32, smem>>>(words, flagged, counters, n, stages, src, chunks_per_block, streaming,
                                             in_flight, stamps, failed);
    });
    int bad = 0;
    CHECK(cudaMemcpy(&bad, failed, 4, cudaMemcpyDeviceToHost));
    std::printf(
        "{\"bench\": \"handoff\", \"words\": %d, \"bytes_read\": %d, \"memory\": \"%s\", \"copies_in_flight\": %d, "
        "\"mode\": \"%s\", \"us_per_stage\": %.3f, \"bad_values\": %d}\n",
        n, n * (flag ? 8 : 4), memory_name(streaming), in_flight, flag ? "flag" : "counter", span / stages, bad);
    std::fflush(stdout);
  };
  // The vectors of a decode layer at B = 1, in 32-bit values: 0.6B's hidden f32 (1,024) and
  // intermediate bf16 (3,072 = 1,536 words), 8B's (4,096 and 6,144).
  for (int n : {1024, 1536, 4096, 6144}) {
    for (int streaming : {kIdle, kBurst, kContinuous}) {
      for (int in_flight : {4, 2, 1}) {
        if (streaming == kIdle && in_flight != 4) continue;  // no copies to limit
        for (bool flag : {false, true}) measure(n, streaming, in_flight, flag);
      }
    }
  }
  return 0;
}
