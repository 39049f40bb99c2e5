#include "runtime/cuda/sm_probe_kernel.h"

namespace evt::runtime::cuda {

namespace {

__device__ uint32_t sm_id() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void sm_probe(int32_t* smid, uint64_t* start, uint64_t* end) {
  if (threadIdx.x != 0) return;
  const uint64_t t0 = global_timer_ns();
  // Bounded by the timer, so blocks overlap and the timer visibly advances.
  while (global_timer_ns() - t0 < 20000) {
  }
  smid[blockIdx.x] = static_cast<int32_t>(sm_id());
  start[blockIdx.x] = t0;
  end[blockIdx.x] = global_timer_ns();
}

}  // namespace

cudaError_t launch_sm_probe(int blocks, int32_t* smid, uint64_t* start_ns, uint64_t* end_ns) {
  sm_probe<<<blocks, 32>>>(smid, start_ns, end_ns);
  return cudaGetLastError();
}

}  // namespace evt::runtime::cuda
