#pragma once
// What code compiled by both nvcc and the host compiler needs first: EVT_HD for functions of
// both sides, EVT_UNROLL, EVT_NO_UNROLL, EVT_NOINLINE, and constexpr min/max usable in device code.

#if defined(__CUDACC__)
#define EVT_HD __host__ __device__
#else
#define EVT_HD
#endif

// Full unrolling for nvcc in code both compilers read (the host compiler has no bare `unroll`).
#if defined(__CUDA_ARCH__)
#define EVT_UNROLL _Pragma("unroll")
#else
#define EVT_UNROLL
#endif

// No unrolling, for a loop that runs rarely (once a layer) where its copies would cost more in
// instruction fetch than the loop costs in branches.
#if defined(__CUDA_ARCH__)
#define EVT_NO_UNROLL _Pragma("unroll 1")
#else
#define EVT_NO_UNROLL
#endif

// A function the GPU calls rather than inlines: a rare path that would otherwise be copied into
// every place its caller is inlined (the host compiler decides for itself).
#if defined(__CUDACC__)
#define EVT_NOINLINE __noinline__
#else
#define EVT_NOINLINE
#endif

namespace evt::kernels {

template <typename T>
EVT_HD constexpr T min_of(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
EVT_HD constexpr T max_of(T a, T b) {
  return a < b ? b : a;
}

}  // namespace evt::kernels
