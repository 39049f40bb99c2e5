// What bounds a normed projection's first phase at B >= 16: every block of the step reads the same
// input rows from the L2 at the same moment (Qwen3-8B's qkv and gate/up at B = 16: 16 rows of 4096
// floats, 256 KiB a block, 10.6 us traced against 2.8 at B = 1). Here one block per SM (12 warps,
// as the decode block's consumers) reads `rows` rows of `cols` values as `stage_pass` does: each
// row in parts, a warp's lanes over adjacent octets of a part, the squares added. Measured by
// element type (f32 as now, bf16 for half the bytes), octets in flight a lane (1, 2, 4), the
// blocks' start (all at the first part, or each at its own), and blocks reading (132, or fewer:
// if the time falls with them, the L2's throughput is the bound, not a thread's round trips).
// And the same bf16 rows copied into shared memory rather than loaded into registers: by 16-byte
// copies (cp.async, each thread's all issued before it waits, as the GEMV stages an unnormed
// input) or by one bulk copy a row (cp.async.bulk, the copy engine the weight ring uses), in
// chunks of columns that fit 200 KiB, a block barrier after each; and in 104 KiB, with and without
// a DRAM stream into a ring of 3 x 32 KiB meanwhile, as the megakernel's loader streams weights.
// Time: each block's span between two block barriers (%globaltimer), the slowest block of a
// launch, the median over launches. Standalone: one JSON object per line, then a table.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda_check.h"
#include "kernels/bulk_copy.h"
#include "kernels/llm/warp_ops.h"
#include "stream_common.cuh"

namespace {

constexpr int kWarps = 12;
constexpr int kThreads = kWarps * 32;
constexpr int kLaunches = 25;

// Eight values at p as floats, loaded past the L1 (a block reads each value once).
template <bool kBf16>
__device__ void load8(const void* base, int64_t i, float (&v)[8]) {
  if constexpr (kBf16) {
    const uint4 u = __ldcg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + i));
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    for (int j = 0; j < 4; ++j) v[2 * j] = __uint_as_float(w[j] << 16), v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
  } else {
    const float4 a = __ldcg(reinterpret_cast<const float4*>(static_cast<const float*>(base) + i));
    const float4 b = __ldcg(reinterpret_cast<const float4*>(static_cast<const float*>(base) + i) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

template <bool kBf16, int kAhead>
__global__ void __launch_bounds__(kThreads) read_rows(const void* x, int rows, int cols, bool stagger, uint64_t* span,
                                                      float* sink) {
  extern __shared__ float red[];
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int parts = rows <= kWarps ? kWarps / rows : 2;  // stage_pass: two parts a row of a set of 16
  const int per = ((cols + parts - 1) / parts + 7) / 8 * 8, total = rows * parts;
  const int first = stagger ? static_cast<int>(blockIdx.x) % total : 0;
  __syncthreads();
  const uint64_t t0 = now_ns();
  float sum = 0;
  for (int j = w; j < total; j += kWarps) {
    const int i = (j + first) % total, row = i / parts, part = i % parts;
    const int c1 = min(cols, (part + 1) * per);
    for (int col = part * per + 8 * lane; col < c1; col += 8 * 32 * kAhead) {
      float v[kAhead][8];
      for (int a = 0; a < kAhead; ++a) {
        if (col + a * 256 < c1) load8<kBf16>(x, int64_t{row} * cols + col + a * 256, v[a]);
        else for (float& e : v[a]) e = 0;
      }
      for (int a = 0; a < kAhead; ++a)
        for (float e : v[a]) sum += e * e;
    }
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  const uint64_t t1 = now_ns();
  if (threadIdx.x == 0) {
    span[blockIdx.x] = t1 - t0;
    float s = 0;
    for (int t = 0; t < kThreads; ++t) s += red[t];
    sink[blockIdx.x] = s;  // keeps the loads
  }
}

enum class Mode { kLoads, kCopy16, kBulk };

constexpr int kStreamStages = 3, kStreamChunk = 32 * 1024;  // the megakernel's ring at B >= 16
constexpr int64_t kStreamBytesPerBlock = 8 << 20;

using evt::kernels::llm::copy16_to_shared;
using evt::kernels::llm::copy16_wait_all;
using evt::kernels::expect_copy_bytes;
using evt::kernels::init_copy_barrier;
using evt::kernels::wait_copies;

// `bytes` from global to shared memory by the copy engine under the L2's default policy (the
// rows, which every block reads), counted against `bar`.
__device__ void copy_bulk(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
}

// With kStream, the last warp's lane 0 plays the megakernel's loader meanwhile: it streams this
// block's own region of `w` from DRAM through a ring of kStreamStages 32 KiB stages (after the rows'
// `room` bytes), each refilled as soon as it has landed, until the other warps have their rows.
// Rows x cols bf16 values into shared memory, chunk_cols columns at a time, by the first `workers`
// threads (all of them, or all but the streaming warp).
template <Mode kMode, bool kStream>
__global__ void __launch_bounds__(kThreads) copy_rows(const __nv_bfloat16* x, int rows, int cols, int chunk_cols,
                                                      int room, const unsigned char* w, uint64_t* span, float* sink) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t bar, full[kStreamStages];
  __shared__ volatile int stop;
  constexpr int workers = kStream ? kThreads - 32 : kThreads;
  if (threadIdx.x == 0) {
    init_copy_barrier(&bar);
    for (int s = 0; s < kStreamStages; ++s) init_copy_barrier(&full[s]);
    stop = 0;
  }
  __syncthreads();
  if (kStream && threadIdx.x >= workers) {
    if (threadIdx.x == workers) {
      const unsigned char* region = w + blockIdx.x * kStreamBytesPerBlock;
      int64_t i = 0;
      for (; !stop; ++i) {
        const int s = static_cast<int>(i % kStreamStages);
        if (i >= kStreamStages) wait_copies(&full[s], static_cast<uint32_t>(i / kStreamStages - 1) & 1);
        expect_copy_bytes(&full[s], kStreamChunk);
        copy_bulk(smem + room + s * kStreamChunk, region + i * kStreamChunk % kStreamBytesPerBlock, kStreamChunk,
                  &full[s]);
      }
      for (int64_t j = i > kStreamStages ? i - kStreamStages : 0; j < i; ++j) {  // the copies in flight land
        wait_copies(&full[j % kStreamStages], static_cast<uint32_t>(j / kStreamStages) & 1);
      }
    }
    return;
  }
  const auto sync_workers = [] { asm volatile("bar.sync 1, %0;" ::"n"(workers) : "memory"); };
  sync_workers();
  const uint64_t t0 = now_ns();
  uint16_t* stage = reinterpret_cast<uint16_t*>(smem);
  uint32_t phase = 0;
  for (int c = 0; c < cols; c += chunk_cols) {
    const int n = min(chunk_cols, cols - c);
    if constexpr (kMode == Mode::kCopy16) {
      const int octets = n / 8;
      for (int i = threadIdx.x; i < rows * octets; i += workers) {
        const int r = i / octets, o = i % octets;
        copy16_to_shared(stage + r * chunk_cols + 8 * o, x + int64_t{r} * cols + c + 8 * o, true);
      }
      copy16_wait_all();
    } else {
      if (threadIdx.x < 32) {  // warp 0: lane 0 expects the bytes, the lanes copy a row each
        if (threadIdx.x == 0) expect_copy_bytes(&bar, rows * n * 2);
        __syncwarp();
        for (int r = threadIdx.x; r < rows; r += 32) {
          copy_bulk(stage + r * chunk_cols, x + int64_t{r} * cols + c, n * 2, &bar);
        }
      }
      wait_copies(&bar, phase);
      phase ^= 1;
    }
    sync_workers();  // every copy landed before the next chunk overwrites the stage
  }
  const uint64_t t1 = now_ns();
  if (threadIdx.x == 0) {
    stop = 1;
    span[blockIdx.x] = t1 - t0;
    sink[blockIdx.x] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(smem)[blockIdx.x]);
  }
}

constexpr int kCopySmem = 200 * 1024;                                   // without the stream
constexpr int kRowsBesideStream = kCopySmem - kStreamStages * kStreamChunk;  // with it

struct Config {
  bool bf16;
  int ahead, rows, blocks;
  bool stagger;
  Mode mode = Mode::kLoads;
  int room_kib = kCopySmem / 1024;  // shared memory for the rows, for the copies
  bool stream = false;              // a DRAM stream through a ring meanwhile (copy_rows)
};

template <bool kBf16, int kAhead>
void launch(const Config& c, const void* x, int cols, uint64_t* span, float* sink) {
  const int smem = 100 * 1024;  // one block an SM
  CHECK(cudaFuncSetAttribute(read_rows<kBf16, kAhead>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  read_rows<kBf16, kAhead><<<c.blocks, kThreads, smem>>>(x, c.rows, cols, c.stagger, span, sink);
}

template <Mode kMode, bool kStream>
void launch_copies(const Config& c, const void* x, int cols, const unsigned char* w, uint64_t* span, float* sink) {
  const auto kernel = copy_rows<kMode, kStream>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kCopySmem));
  const int room = c.room_kib * 1024, chunk = std::min(cols, room / (2 * c.rows) / 8 * 8);
  kernel<<<c.blocks, kThreads, kCopySmem>>>(static_cast<const __nv_bfloat16*>(x), c.rows, cols, chunk, room, w, span,
                                            sink);
}

void run(const Config& c, const void* x, int cols, const unsigned char* w, uint64_t* span, float* sink) {
  if (c.mode != Mode::kLoads) {
    const auto pick = [&]<bool kStream>() {
      if (c.mode == Mode::kCopy16) launch_copies<Mode::kCopy16, kStream>(c, x, cols, w, span, sink);
      if (c.mode == Mode::kBulk) launch_copies<Mode::kBulk, kStream>(c, x, cols, w, span, sink);
    };
    if (c.stream) pick.template operator()<true>();
    else pick.template operator()<false>();
    CHECK(cudaGetLastError());
    return;
  }
  const auto pick = [&]<bool kBf16>() {
    if (c.ahead == 1) launch<kBf16, 1>(c, x, cols, span, sink);
    if (c.ahead == 2) launch<kBf16, 2>(c, x, cols, span, sink);
    if (c.ahead == 4) launch<kBf16, 4>(c, x, cols, span, sink);
  };
  if (c.bf16) pick.template operator()<true>();
  else pick.template operator()<false>();
  CHECK(cudaGetLastError());
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  constexpr int kCols = 4096, kMaxRows = 64;
  void* x = nullptr;
  uint64_t* span = nullptr;
  float* sink = nullptr;
  unsigned char* w = nullptr;  // the streams' regions, one a block
  CHECK(cudaMalloc(&x, size_t{kMaxRows} * kCols * 4));
  CHECK(cudaMalloc(&w, size_t(sms) * kStreamBytesPerBlock));
  CHECK(cudaMemset(w, 0x3c, size_t(sms) * kStreamBytesPerBlock));
  CHECK(cudaMemset(x, 0x3c, size_t{kMaxRows} * kCols * 4));
  CHECK(cudaMalloc(&span, sizeof(uint64_t) * sms));
  CHECK(cudaMalloc(&sink, sizeof(float) * sms));
  std::vector<Config> configs;
  for (int rows : {1, 16, 64}) {
    for (bool bf16 : {false, true}) {
      for (int ahead : {1, 2, 4}) configs.push_back({bf16, ahead, rows, sms, false});
      configs.push_back({bf16, 1, rows, sms, true});
      configs.push_back({bf16, 1, rows, sms / 4, false});
    }
    if (rows > 1) {
      for (Mode mode : {Mode::kCopy16, Mode::kBulk}) {
        configs.push_back({true, 1, rows, sms, false, mode});
        configs.push_back({true, 1, rows, sms / 4, false, mode});
        // Beside the stream, in the room it leaves; and without it in the same room.
        for (bool stream : {false, true}) {
          configs.push_back({true, 1, rows, sms, false, mode, kRowsBesideStream / 1024, stream});
        }
      }
    }
  }
  const auto mode_name = [](Mode m) { return m == Mode::kLoads ? "loads" : m == Mode::kCopy16 ? "copy16" : "bulk"; };
  std::printf("%-5s %-6s %5s %6s %7s %7s %8s %6s %9s %10s\n", "type", "mode", "rows", "ahead", "stagger", "blocks",
              "room KiB", "stream", "span us", "TB/s (L2)");
  std::vector<char> table;
  for (const Config& c : configs) {
    std::vector<double> spans;
    for (int l = 0; l < kLaunches; ++l) {
      run(c, x, kCols, w, span, sink);
      CHECK(cudaDeviceSynchronize());
      std::vector<uint64_t> s(c.blocks);
      CHECK(cudaMemcpy(s.data(), span, sizeof(uint64_t) * c.blocks, cudaMemcpyDeviceToHost));
      spans.push_back(static_cast<double>(*std::max_element(s.begin(), s.end())) / 1000.0);
    }
    std::sort(spans.begin(), spans.end());
    const double us = spans[spans.size() / 2];
    const double bytes = double(c.blocks) * c.rows * kCols * (c.bf16 ? 2 : 4);
    std::printf("{\"bench\": \"shared_rows\", \"type\": \"%s\", \"mode\": \"%s\", \"rows\": %d, \"cols\": %d, "
                "\"ahead\": %d, \"stagger\": %s, \"blocks\": %d, \"room_kib\": %d, \"stream\": %s, "
                "\"span_us_median\": %.3f, \"l2_tbps\": %.3f}\n",
                c.bf16 ? "bf16" : "f32", mode_name(c.mode), c.rows, kCols, c.ahead, c.stagger ? "true" : "false",
                c.blocks, c.room_kib, c.stream ? "true" : "false", us, bytes / us / 1e6);
    char line[160];
    const int n = std::snprintf(line, sizeof line, "%-5s %-6s %5d %6d %7s %7d %8d %6s %9.3f %10.3f\n",
                                c.bf16 ? "bf16" : "f32", mode_name(c.mode), c.rows, c.ahead, c.stagger ? "yes" : "no",
                                c.blocks, c.room_kib, c.stream ? "yes" : "no", us, bytes / us / 1e6);
    table.insert(table.end(), line, line + n);
  }
  std::printf("%.*s", static_cast<int>(table.size()), table.data());
  return 0;
}
