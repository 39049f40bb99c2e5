#pragma once
// What the streaming microbenchmarks share (stream_micro, l2_ahead_micro): the blocks' time stamps
// and the launches' median span, and a bounded wait on a ring's mbarrier. Every block stamps
// %globaltimer when it starts and ends (stamps[2 b], stamps[2 b + 1]); a launch's span is the last
// end minus the first start, so launch overhead stays out and short launches show their latency.

#include <cuda/ptx>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda_check.h"

inline constexpr uint32_t kSpinLimit = 1u << 28;  // polls before a wait gives up (never hang)

__device__ inline uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Until the barrier's phase `parity` completed; false (and *failed set) past kSpinLimit polls.
__device__ inline bool wait_phase(uint64_t* bar, uint32_t parity, int* failed) {
  for (uint32_t spins = 0; spins < kSpinLimit; ++spins) {
    if (cuda::ptx::mbarrier_try_wait_parity(bar, parity)) return true;
  }
  *failed = 1;
  return false;
}

// The median span (us) of `reps` launches after one warm-up. Launch r is given the byte offset of
// its own region of `bytes` within a buffer of `buffer_bytes` (far past the L2), so that no launch
// finds the previous one's data in the L2.
template <class Launch>
double median_launch_span_us(int sms, const uint64_t* stamps_device, int64_t buffer_bytes, int64_t bytes, int reps,
                      Launch&& launch) {
  std::vector<double> spans;
  std::vector<uint64_t> stamps(2 * sms);
  for (int r = 0; r < reps + 1; ++r) {
    launch((r * bytes) % (buffer_bytes - bytes) / 4096 * 4096);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(stamps.data(), stamps_device, stamps.size() * 8, cudaMemcpyDeviceToHost));
    uint64_t first = ~0ull, last = 0;
    for (int b = 0; b < sms; ++b) {
      first = std::min(first, stamps[2 * b]);
      last = std::max(last, stamps[2 * b + 1]);
    }
    if (r > 0) spans.push_back((last - first) / 1e3);
  }
  std::nth_element(spans.begin(), spans.begin() + reps / 2, spans.end());
  return spans[reps / 2];
}
