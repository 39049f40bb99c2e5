// The CUDA megakernel of the wrong-count graph, for the time-out test.

#include "megakernels/splitk_wrong_count.h"
#include "runtime/megakernel/cuda_launch.cuh"

template struct evt::mk::CudaLaunch<evt::generated::splitk_wrong_count::Megakernel>;
