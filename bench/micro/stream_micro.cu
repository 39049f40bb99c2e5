// How fast one block per SM can stream weights, to find what bounds the decode projections (which
// reach about 2 TB/s of the H200's 4.6): every block reads its own contiguous slice of a buffer
// much larger than the L2, either
//   - through a shared-memory ring that a loader warp fills with bulk copies (the megakernel's
//     design, runtime/megakernel/weight_ring.cuh), varying the stages, the chunk size, the size
//     of each bulk copy, and what the 15 consumer warps do with each chunk (release it at once,
//     read it, multiply it with tensor cores as gemv.h does, or leave all of it to one warp); or
//   - by plain 16-byte loads from every consumer thread, U loads in flight per thread.
// Each block stamps %globaltimer when it starts and ends; the span is the last end minus the
// first start, so launch overhead stays out and small slices show their latency. With `share` > 1
// the blocks read their slices in groups of `share` blocks that read the same slice at once (as a
// MoE expert's tiles of one weight panel and different slices of its tokens do): what the L2
// gives the SMs when each line comes from memory once and `share` blocks ask for it. Last, what a
// task's notification and its dependent loads cost while the blocks stream: a release fence and
// four dependent L2 loads per chunk, timed with clock64.
// Standalone: prints one JSON object per line, then a table. Results: bench/README.md.

#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"
#include "stream_common.cuh"
#include "kernels/bulk_copy.h"
#include "kernels/l2_policy.h"

namespace {

constexpr int kConsumerWarps = 15;  // the decode block's (kernels/llm/decode_config.h)
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kMaxStages = 16;
constexpr int kTileBytes = 1024;

// kMmaOneWarp: each chunk's 16 tiles all go to one warp (chunk c to warp c % 12), as a chunk
// holding one weight group's slab goes to the one warp that owns the group.
enum Work { kRelease = 0, kRead = 1, kMma = 2, kMmaOneWarp = 3 };
const char* work_name(int w) {
  const char* names[] = {"release", "read", "mma", "mma1w"};
  return names[w];
}

__device__ void mma_bf16(float* d, uint4 a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// A block's ring: `stages` chunks of `chunk` bytes at the start of its dynamic shared memory, each
// with a `full` and an `empty` barrier. The loader (lane 0 of the last warp) fills chunk c of the
// block's slice once the consumers emptied its stage, as chunk / piece bulk copies; with `copy`
// false it only marks the stage full, so nothing streams.
struct Ring {
  unsigned char* data;
  uint64_t* full;
  uint64_t* empty;
  int stages, chunk;

  // Thread 0, then the whole block synchronizes (start).
  __device__ void init() const {
    for (int s = 0; s < stages; ++s) {
      cuda::ptx::mbarrier_init(&full[s], 1);
      cuda::ptx::mbarrier_init(&empty[s], kConsumerWarps);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  // Every thread of the block: sets the ring up, then the loader warp streams `chunks` chunks of
  // the block's slice and is done (false); the consumer threads go on (true). With evict_first
  // the copies bring their lines into the L2 under the evict-first policy, as the megakernel's do.
  __device__ bool start(const unsigned char* slice, int64_t chunks, int piece, bool copy, int* failed,
                        bool evict_first = false) const {
    if (threadIdx.x == 0) init();
    __syncthreads();
    if (threadIdx.x / 32 < kConsumerWarps) return true;
    if (threadIdx.x % 32 == 0) load(slice, chunks, piece, copy, failed, evict_first);
    return false;
  }
  __device__ void load(const unsigned char* slice, int64_t chunks, int piece, bool copy, int* failed,
                       bool evict_first) const {
    const uint64_t policy = evt::kernels::evict_first_policy();
    for (int64_t c = 0; c < chunks; ++c) {
      const int s = static_cast<int>(c % stages);
      if (c >= stages && !wait_phase(&empty[s], static_cast<uint32_t>((c / stages - 1) & 1), failed)) break;
      if (!copy) {
        cuda::ptx::mbarrier_arrive(&full[s]);
        continue;
      }
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                           &full[s], static_cast<uint32_t>(chunk));
      for (int at = 0; at < chunk; at += piece) {
        if (evict_first) {
          evt::kernels::copy_bulk(data + int64_t{s} * chunk + at, slice + c * chunk + at, static_cast<uint32_t>(piece),
                                  &full[s], policy);
        } else {
          cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, data + int64_t{s} * chunk + at,
                                   slice + c * chunk + at, static_cast<uint32_t>(piece), &full[s]);
        }
      }
    }
    // Every copy must land before the block exits.
    for (int64_t c = chunks > stages ? chunks - stages : 0; c < chunks; ++c) {
      wait_phase(&full[c % stages], static_cast<uint32_t>((c / stages) & 1), failed);
    }
  }
  // A consumer: chunk c's data once it landed (null when the wait gave up), and its release.
  __device__ const unsigned char* acquire(int64_t c, int* failed) const {
    const int s = static_cast<int>(c % stages);
    return wait_phase(&full[s], static_cast<uint32_t>((c / stages) & 1), failed) ? data + int64_t{s} * chunk : nullptr;
  }
  __device__ void release(int64_t c) const {
    __syncwarp();
    if (threadIdx.x % 32 == 0) cuda::ptx::mbarrier_arrive(&empty[c % stages]);
  }
};

// The ring: `stages` chunks of `chunk` bytes; the loader copies each chunk as chunk / piece bulk
// copies. Consumer warp w takes tiles w, w + 15, ... of each chunk. Blocks b and b' read the same
// slice when b / share == b' / share.
template <int kWork>
__global__ void __launch_bounds__(kThreads, 1)
    ring_stream(const unsigned char* src, int64_t per_block, int stages, int chunk, int piece, int share,
                bool evict_first, uint64_t* stamps, float* sink, int* failed) {
  extern __shared__ __align__(128) unsigned char ring_data[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  const uint64_t start = now_ns();
  const Ring ring{ring_data, full, empty, stages, chunk};
  const int64_t chunks = per_block / chunk;
  if (!ring.start(src + per_block * (blockIdx.x / share), chunks, piece, true, failed, evict_first)) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float acc[4] = {};
  uint32_t x = 0;
  const int tiles = chunk / kTileBytes;
  for (int64_t c = 0; c < chunks; ++c) {
    const unsigned char* data = ring.acquire(c, failed);
    if (data == nullptr) break;
    if constexpr (kWork != kRelease) {
      const bool mine = kWork != kMmaOneWarp || warp == c % 12;
      const int first = kWork == kMmaOneWarp ? 0 : warp, step = kWork == kMmaOneWarp ? 1 : kConsumerWarps;
      for (int t = mine ? first : tiles; t < tiles; t += step) {
        const uint4 a0 = *reinterpret_cast<const uint4*>(data + t * kTileBytes + lane * 16);
        const uint4 a1 = *reinterpret_cast<const uint4*>(data + t * kTileBytes + 512 + lane * 16);
        if constexpr (kWork == kRead) {
          x ^= a0.x ^ a0.y ^ a0.z ^ a0.w ^ a1.x ^ a1.y ^ a1.z ^ a1.w;
        } else {
          mma_bf16(acc, a0, 0x3f803f80u, static_cast<uint32_t>(t));
          mma_bf16(acc, a1, 0x3f803f80u, static_cast<uint32_t>(t));
        }
      }
    }
    ring.release(c);
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc[0] + acc[1] + acc[2] + acc[3] + static_cast<float>(x);
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
  if (threadIdx.x == 0) {
    stamps[2 * blockIdx.x] = start;
    stamps[2 * blockIdx.x + 1] = now_ns();
  }
}

// Plain loads: every consumer thread keeps kU 16-byte loads in flight (no L1 allocation; with
// kEvictFirst under the L2 evict-first policy instead) over the block's slice of `vecs` 16-byte
// words; returns their xor.
template <int kU, bool kEvictFirst = false>
__device__ uint32_t load_slice(const uint4* mine, int64_t vecs) {
  const int n = kConsumerWarps * 32;
  const uint64_t policy = evt::kernels::evict_first_policy();
  uint32_t x = 0;
  for (int64_t i = threadIdx.x; i < vecs; i += int64_t{n} * kU) {
    uint4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t k = i + int64_t{u} * n;
      if (k >= vecs) {
        v[u] = make_uint4(0, 0, 0, 0);
      } else if constexpr (kEvictFirst) {
        v[u] = evt::kernels::load16(mine + k, policy);
      } else {
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(mine + k));
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  return x;
}

template <int kU>
__global__ void __launch_bounds__(kThreads, 1)
    direct_stream(const unsigned char* src, int64_t per_block, uint64_t* stamps, float* sink) {
  const uint64_t start = now_ns();
  if (threadIdx.x >= kConsumerWarps * 32) return;
  const uint32_t x = load_slice<kU>(reinterpret_cast<const uint4*>(src + per_block * blockIdx.x), per_block / 16);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(x);
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
  if (threadIdx.x == 0) {
    stamps[2 * blockIdx.x] = start;
    stamps[2 * blockIdx.x + 1] = now_ns();
  }
}

// How long a dependent load from the L2 takes while every SM streams (a latency-bound task's
// index chain, while the other SMs stream weights): the consumer warps stream the block's slice
// with plain loads (kLoad; kEvictFirst: under the L2 evict-first policy, as the decode step
// streams its weights) or idle as long, and the last warp's lane 0 meanwhile walks a chain of
// words, each giving the next index, until they are done. The chain's 128 lines are each visited
// every ~128 loads: a default-policy stream may evict them between visits, an evict-first one
// leaves them in the L2 (both measured the same on an H200: results/l2_probe_evict_first_h200.json).
// cycles[2b], [2b + 1]: the walk's cycles and loads.
template <bool kLoad, bool kEvictFirst = false>
__global__ void __launch_bounds__(kThreads, 1)
    probe_latency(const unsigned char* src, int64_t per_block, const uint32_t* chain, uint64_t* stamps, float* sink,
                  uint64_t* cycles) {
  __shared__ volatile int done;
  const uint64_t start = now_ns();
  if (threadIdx.x == 0) done = 0;
  __syncthreads();
  if (threadIdx.x >= kConsumerWarps * 32) {
    if (threadIdx.x != kConsumerWarps * 32) return;
    uint32_t at = blockIdx.x * 31 % 4096;
    uint64_t loads = 0;
    const uint64_t t0 = clock64();
    while (done == 0) {
      for (int k = 0; k < 8; ++k) asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(at) : "l"(chain + at) : "memory");
      loads += 8;
    }
    cycles[2 * blockIdx.x] = clock64() - t0 + (at == 0xffffffffu);
    cycles[2 * blockIdx.x + 1] = loads;
    return;
  }
  uint32_t x = 0;
  if (kLoad) {
    x = load_slice<4, kEvictFirst>(reinterpret_cast<const uint4*>(src + per_block * blockIdx.x), per_block / 16);
  } else {
    while (now_ns() - start < 50000) {
    }
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(x);
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
  if (threadIdx.x == 0) {
    done = 1;
    stamps[2 * blockIdx.x] = start;
    stamps[2 * blockIdx.x + 1] = now_ns();
  }
}

// What a task's notification costs while weights stream: per chunk, every consumer thread
// stores a word (a task's output), the consumers meet at a barrier, and thread 0 runs the release
// fence a notification starts with, then four dependent loads from the L2 (a latency-bound body's
// index chain), each timed with clock64. kStream: the loader streams meanwhile (one block per SM,
// as in ring_stream); otherwise nothing else is in flight.
template <bool kStream>
__global__ void __launch_bounds__(kThreads, 1)
    fence_cost(const unsigned char* src, int64_t per_block, int stages, const uint32_t* chain, uint64_t* stamps,
               float* out, uint64_t* cycles, int* failed) {
  extern __shared__ __align__(128) unsigned char ring_data[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  const uint64_t start = now_ns();
  constexpr int kChunk = 16384;
  const Ring ring{ring_data, full, empty, stages, kChunk};
  const int64_t chunks = per_block / kChunk;
  if (!ring.start(src + per_block * blockIdx.x, chunks, kChunk, kStream, failed)) return;
  uint64_t spent = 0, chased = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    if (ring.acquire(c, failed) == nullptr) break;
    out[(blockIdx.x * kConsumerWarps * 32 + threadIdx.x) * 4 + (c & 3)] = static_cast<float>(c);
    asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
    if (threadIdx.x == 0) {
      const uint64_t t0 = clock64();
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
      const uint64_t t1 = clock64();
      // Four dependent loads of a small table that stays in the L2, each giving the next index.
      uint32_t at = (blockIdx.x * 64 + static_cast<uint32_t>(c)) % 4096;
      for (int k = 0; k < 4; ++k) {
        uint32_t v;
        asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(chain + at) : "memory");
        at = v;
      }
      chased += clock64() - t1 + (at == 0xffffffffu);
      spent += t1 - t0;
    }
    ring.release(c);
  }
  asm volatile("bar.sync 1, %0;" ::"r"(kConsumerWarps * 32));
  if (threadIdx.x == 0) {
    cycles[2 * blockIdx.x] = chunks > 0 ? spent / chunks : 0;
    cycles[2 * blockIdx.x + 1] = chunks > 0 ? chased / chunks / 4 : 0;
    stamps[2 * blockIdx.x] = start;
    stamps[2 * blockIdx.x + 1] = now_ns();
  }
}

struct Device {
  int sms = 0;
  unsigned char* buffer = nullptr;
  int64_t buffer_bytes = int64_t{4} << 30;  // far past the L2: each rep reads a fresh region
  uint64_t* stamps = nullptr;
  uint64_t* cycles = nullptr;
  uint32_t* chain = nullptr;  // 4096 words, each the index of another
  float* sink = nullptr;
  int* failed = nullptr;
};

// Median span (us) over reps, each launch on the next region of the buffer.
template <class Launch>
double median_span_us(const Device& d, int64_t per_block, Launch&& launch, int reps = 15) {
  return median_launch_span_us(d.sms, d.stamps, d.buffer_bytes, per_block * d.sms, reps,
                               [&](int64_t offset) { launch(d.buffer + offset); });
}

struct Row {
  char what[96];
  int64_t per_block;
  double us, tbps;
};
std::vector<Row> g_rows;

void report(const Device& d, const char* json_fields, const char* what, int64_t per_block, double us) {
  const double tbps = static_cast<double>(per_block) * d.sms / (us * 1e-6) / 1e12;
  std::printf("{%s, \"kib_per_sm\": %lld, \"span_us\": %.2f, \"tbps\": %.3f}\n", json_fields,
              static_cast<long long>(per_block / 1024), us, tbps);
  Row row{};
  std::snprintf(row.what, sizeof row.what, "%s", what);
  row.per_block = per_block;
  row.us = us;
  row.tbps = tbps;
  g_rows.push_back(row);
}

template <int kWork>
void ring(const Device& d, int64_t per_block, int stages, int chunk, int piece, int share = 1,
          bool evict_first = false) {
  const int smem = stages * chunk;
  CHECK(cudaFuncSetAttribute(ring_stream<kWork>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double us = median_span_us(d, per_block, [&](const unsigned char* src) {
    ring_stream<kWork><<<d.sms, kThreads, smem>>>(src, per_block, stages, chunk, piece, share, evict_first, d.stamps,
                                                  d.sink, d.failed);
  });
  int failed = 0;
  CHECK(cudaMemcpy(&failed, d.failed, sizeof failed, cudaMemcpyDeviceToHost));
  char json[256], what[96];
  std::snprintf(json, sizeof json,
                "\"bench\": \"ring\", \"work\": \"%s\", \"stages\": %d, \"chunk_kib\": %d, \"copy_bytes\": %d, "
                "\"share\": %d, \"evict_first\": %s, \"failed\": %d",
                work_name(kWork), stages, chunk / 1024, piece, share, evict_first ? "true" : "false", failed);
  std::snprintf(what, sizeof what, "ring %-7s %2d x %2d KiB, copies of %5d B, %d a slice%s%s", work_name(kWork),
                stages, chunk / 1024, piece, share, evict_first ? ", evict-first" : "", failed ? " FAILED" : "");
  report(d, json, what, per_block, us);
}

template <int kU>
void direct(const Device& d, int64_t per_block) {
  const double us = median_span_us(d, per_block, [&](const unsigned char* src) {
    direct_stream<kU><<<d.sms, kThreads>>>(src, per_block, d.stamps, d.sink);
  });
  char json[128], what[96];
  std::snprintf(json, sizeof json, "\"bench\": \"direct\", \"loads_in_flight\": %d", kU);
  std::snprintf(what, sizeof what, "direct 16-byte loads, %d in flight per thread", kU);
  report(d, json, what, per_block, us);
}


// A dependent L2 load's latency (median over the blocks) while every SM streams, and idle.
template <bool kLoad, bool kEvictFirst = false>
void probe(const Device& d, int64_t per_block) {
  const double us = median_span_us(d, per_block, [&](const unsigned char* src) {
    probe_latency<kLoad, kEvictFirst><<<d.sms, kThreads>>>(src, per_block, d.chain, d.stamps, d.sink, d.cycles);
  });
  std::vector<uint64_t> cycles(2 * d.sms), per_load(d.sms);
  CHECK(cudaMemcpy(cycles.data(), d.cycles, cycles.size() * 8, cudaMemcpyDeviceToHost));
  for (int b = 0; b < d.sms; ++b) per_load[b] = cycles[2 * b] / std::max<uint64_t>(cycles[2 * b + 1], 1);
  std::nth_element(per_load.begin(), per_load.begin() + d.sms / 2, per_load.end());
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double load_ns = per_load[d.sms / 2] * 1e6 / clock_khz;
  char json[160], what[96];
  std::snprintf(json, sizeof json,
                "\"bench\": \"probe\", \"streaming\": %s, \"evict_first\": %s, \"l2_dependent_load_ns\": %.0f",
                kLoad ? "true" : "false", kEvictFirst ? "true" : "false", load_ns);
  std::snprintf(what, sizeof what, "L2 load beside %s: %.0f ns",
                !kLoad ? "idle SMs" : kEvictFirst ? "evict-first streaming" : "plain-load streaming", load_ns);
  report(d, json, what, kLoad ? per_block : 0, us);
}

// The release fence's cost in SM cycles (median over the blocks), with and without streaming.
template <bool kStream>
void fence(const Device& d, int64_t per_block) {
  const int stages = 4, smem = stages * 16384;
  CHECK(cudaFuncSetAttribute(fence_cost<kStream>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double us = median_span_us(d, per_block, [&](const unsigned char* src) {
    fence_cost<kStream><<<d.sms, kThreads, smem>>>(src, per_block, stages, d.chain, d.stamps, d.sink, d.cycles,
                                                   d.failed);
  });
  std::vector<uint64_t> cycles(2 * d.sms), fences(d.sms), loads(d.sms);
  CHECK(cudaMemcpy(cycles.data(), d.cycles, cycles.size() * 8, cudaMemcpyDeviceToHost));
  for (int b = 0; b < d.sms; ++b) fences[b] = cycles[2 * b], loads[b] = cycles[2 * b + 1];
  std::nth_element(fences.begin(), fences.begin() + d.sms / 2, fences.end());
  std::nth_element(loads.begin(), loads.begin() + d.sms / 2, loads.end());
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double fence_ns = fences[d.sms / 2] * 1e6 / clock_khz, load_ns = loads[d.sms / 2] * 1e6 / clock_khz;
  char json[200], what[96];
  std::snprintf(json, sizeof json,
                "\"bench\": \"fence\", \"streaming\": %s, \"fence_ns\": %.0f, \"l2_dependent_load_ns\": %.0f",
                kStream ? "true" : "false", fence_ns, load_ns);
  std::snprintf(what, sizeof what, "%s: fence %.0f ns, L2 load %.0f ns", kStream ? "streaming" : "idle", fence_ns,
                load_ns);
  report(d, json, what, per_block, us);
}

}  // namespace

int main() {
  Device d;
  CHECK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaMalloc(&d.buffer, d.buffer_bytes));
  CHECK(cudaMemset(d.buffer, 0x3c, d.buffer_bytes));
  CHECK(cudaMalloc(&d.stamps, 2 * 8 * d.sms));
  CHECK(cudaMalloc(&d.cycles, 16 * d.sms));
  std::vector<uint32_t> chain(4096);
  for (uint32_t i = 0; i < chain.size(); ++i) chain[i] = (i * 2654435761u + 12345u) % 4096;
  CHECK(cudaMalloc(&d.chain, chain.size() * 4));
  CHECK(cudaMemcpy(d.chain, chain.data(), chain.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&d.sink, sizeof(float) * 4 * kThreads * d.sms));
  CHECK(cudaMalloc(&d.failed, sizeof(int)));
  CHECK(cudaMemset(d.failed, 0, sizeof(int)));

  // 1.5 MiB per SM is an 8B gate/up tile; 64 KiB a 0.6B QKV tile.
  for (const int64_t per : {int64_t{1536} << 10, int64_t{64} << 10}) {
    for (const int stages : {2, 4, 8}) ring<kMma>(d, per, stages, 16384, 16384);
    for (const int stages : {4, 8, 12}) ring<kMmaOneWarp>(d, per, stages, 16384, 16384);
    for (const int piece : {1024, 2048, 4096, 8192}) ring<kMma>(d, per, 4, 16384, piece);
    ring<kRelease>(d, per, 4, 16384, 16384);
    ring<kMma>(d, per, 4, 32768, 32768);
    direct<4>(d, per);
    direct<8>(d, per);
  }
  // Blocks in groups reading one slice at once, as a MoE expert's slices of tokens read its tiles.
  for (const bool evict_first : {false, true}) {
    for (const int share : {1, 2, 4, 8}) ring<kMma>(d, int64_t{1536} << 10, 4, 32768, 32768, share, evict_first);
  }
  fence<false>(d, int64_t{1536} << 10);
  fence<true>(d, int64_t{1536} << 10);
  probe<false>(d, int64_t{6} << 20);
  probe<true>(d, int64_t{6} << 20);
  probe<true, true>(d, int64_t{6} << 20);

  std::printf("\n%-64s %9s %9s %8s\n", "streaming (one block per SM; TB/s: what the SMs got)", "KiB/SM", "span us", "TB/s");
  for (const Row& r : g_rows) {
    std::printf("%-64s %9lld %9.2f %8.3f\n", r.what, static_cast<long long>(r.per_block / 1024), r.us, r.tbps);
  }
  return 0;
}
