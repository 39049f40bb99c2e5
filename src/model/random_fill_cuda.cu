// Random bf16 weights generated on the GPU (random_fill_cuda.h).

#include "kernels/llm/warp_ops.h"
#include "model/random_fill_cuda.h"

namespace evt::model {

namespace {

// splitmix64: a cheap, well-mixed hash of the element index.
__device__ uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_random_bf16_kernel(uint16_t* out, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix(seed * 0x100000001b3ull + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    out[i] = evt::kernels::llm::f32_to_bf16(offset + scale * u);
  }
}

}  // namespace

cudaError_t fill_random_bf16(uint16_t* out, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  fill_random_bf16_kernel<<<1024, 256, 0, stream>>>(out, n, seed, scale, offset);
  return cudaGetLastError();
}

}  // namespace evt::model
