// The launch of the dense decode megakernel for head_dim 128. One file per head dim, so the two
// (each minutes of nvcc) compile in parallel.

#include "kernels/llm/decode_config.h"
#include "megakernels/dense_decode_d128.h"
#include "runtime/megakernel/cuda_launch.cuh"

template <>
struct evt::mk::LaunchShape<evt::generated::dense_decode_d128::Megakernel> {
  static constexpr int kThreads = evt::kernels::llm::kDecodeThreads;
  static constexpr int kScratchBytes = evt::kernels::llm::kDecodeScratchBytes;
};

template struct evt::mk::CudaLaunch<evt::generated::dense_decode_d128::Megakernel>;
