#pragma once
// The device's streaming-read bandwidth, measured: the denominator of every decode floor. Kept
// apart so that .cu files include no framework headers.

#include <cuda_runtime.h>

#include <cstdint>

namespace evt::runtime::cuda {

// Reads `bytes` of device memory at `data` with 16-byte loads from every SM (several loads in
// flight per thread), reduces them so the loads cannot be dropped, and returns the median of
// `reps` timed passes in TB/s (1e12 bytes per second).
cudaError_t measure_read_bandwidth(const void* data, int64_t bytes, int reps, double* tbps);

}  // namespace evt::runtime::cuda
