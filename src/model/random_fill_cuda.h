#pragma once
// Random bf16 weights generated on the GPU, for benchmarks of big presets without a disk
// round trip (--random-weights). Plain header: host code calls it, random_fill_cuda.cu defines it.

#include <cuda_runtime.h>

#include <cstdint>

namespace evt::model {

// out[i] = bf16(offset + scale * u_i), u_i uniform in [-1, 1) from a hash of (seed, i).
cudaError_t fill_random_bf16(uint16_t* out, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream);

}  // namespace evt::model
