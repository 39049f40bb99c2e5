// What code the SM has not run lately costs: one block per SM runs N regions of straight-line code
// (each 256 independent FMAs, about 4 KiB of SASS) one after the other, several passes over all of
// them, and thread 0 stamps clock64 after each region. The first pass fetches the code from DRAM;
// later passes find it in the SM's instruction caches when N regions fit there, and in the L2
// otherwise (as a decode step's task bodies do, each run once a layer). So the cycles a region
// takes in a later pass, against N, give the instruction caches' capacity and what a region
// costs when its code comes from the L2.
// Standalone: prints one JSON object per line (a header line first). Results: bench/README.md.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "cuda_check.h"

namespace {

constexpr int kPasses = 4;
constexpr int kRegionInstructions = 256;

#define EVT_FMA8                                                                                      \
  "fma.rn.f32 %0, %0, %8, %9;\n fma.rn.f32 %1, %1, %8, %9;\n fma.rn.f32 %2, %2, %8, %9;\n"           \
  "fma.rn.f32 %3, %3, %8, %9;\n fma.rn.f32 %4, %4, %8, %9;\n fma.rn.f32 %5, %5, %8, %9;\n"           \
  "fma.rn.f32 %6, %6, %8, %9;\n fma.rn.f32 %7, %7, %8, %9;\n"
#define EVT_FMA64 EVT_FMA8 EVT_FMA8 EVT_FMA8 EVT_FMA8 EVT_FMA8 EVT_FMA8 EVT_FMA8 EVT_FMA8

// Eight independent chains, so that a warm region issues about one instruction a cycle.
__device__ __forceinline__ void region(float (&f)[8], float a, float b) {
  asm volatile(EVT_FMA64 EVT_FMA64 EVT_FMA64 EVT_FMA64
               : "+f"(f[0]), "+f"(f[1]), "+f"(f[2]), "+f"(f[3]), "+f"(f[4]), "+f"(f[5]), "+f"(f[6]), "+f"(f[7])
               : "f"(a), "f"(b));
}

__device__ __forceinline__ void stamp(int64_t* out, int64_t& last) {
  const int64_t now = clock64();
  if (threadIdx.x == 0) *out = now - last;
  last = now;
}

// Regions 0..N-1 inlined one after the other: N distinct copies of the code.
template <size_t... R>
__device__ __forceinline__ void run_regions(float (&f)[8], float a, float b, int64_t* out, int64_t& last,
                                            std::index_sequence<R...>) {
  ((region(f, a, b), stamp(out + R, last)), ...);
}

// cycles[block][pass][region]: the cycles between thread 0's stamps.
template <int N>
__global__ void regions_kernel(float a, float b, float* sink, int64_t* cycles) {
  float f[8];
  for (int i = 0; i < 8; ++i) f[i] = static_cast<float>(threadIdx.x + i);
  for (int pass = 0; pass < kPasses; ++pass) {
    int64_t last = clock64();
    run_regions(f, a, b, cycles + (int64_t{blockIdx.x} * kPasses + pass) * N, last, std::make_index_sequence<N>());
    __syncthreads();
  }
  float s = 0;
  for (float v : f) s += v;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int N>
void measure(int sms, int threads, double clock_ghz) {
  float* sink = nullptr;
  int64_t* cycles = nullptr;
  CHECK(cudaMalloc(&sink, sizeof(float) * sms * threads));
  CHECK(cudaMalloc(&cycles, sizeof(int64_t) * sms * kPasses * N));
  regions_kernel<N><<<sms, threads>>>(1.0f, 0.0f, sink, cycles);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<int64_t> host(static_cast<size_t>(sms) * kPasses * N);
  CHECK(cudaMemcpy(host.data(), cycles, sizeof(int64_t) * host.size(), cudaMemcpyDeviceToHost));
  double per_pass[kPasses] = {};
  for (int blk = 0; blk < sms; ++blk) {
    for (int pass = 0; pass < kPasses; ++pass) {
      const int64_t* row = host.data() + (static_cast<size_t>(blk) * kPasses + pass) * N;
      for (int r = 0; r < N; ++r) per_pass[pass] += static_cast<double>(row[r]);
    }
  }
  const double kib = N * kRegionInstructions * 16.0 / 1024;
  std::printf("{\"bench\": \"icache\", \"regions\": %d, \"code_kib\": %.0f, \"threads\": %d", N, kib, threads);
  for (int pass = 0; pass < kPasses; ++pass) {
    const double per_region = per_pass[pass] / (static_cast<double>(sms) * N);
    std::printf(", \"pass%d_cycles_per_region\": %.0f, \"pass%d_ns_per_kib\": %.1f", pass, per_region, pass,
                per_region / clock_ghz / (kRegionInstructions * 16.0 / 1024));
  }
  std::printf("}\n");
  CHECK(cudaFree(sink));
  CHECK(cudaFree(cycles));
}

}  // namespace

int main() {
  int sms = 0, clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double ghz = clock_khz / 1e6;
  std::printf("# %d SMs, %.2f GHz (the attribute's clock; cycles are what was measured)\n", sms, ghz);
  for (int threads : {128, 384}) {
    measure<4>(sms, threads, ghz);
    measure<8>(sms, threads, ghz);
    measure<16>(sms, threads, ghz);
    measure<32>(sms, threads, ghz);
    measure<64>(sms, threads, ghz);
    measure<128>(sms, threads, ghz);
  }
}
