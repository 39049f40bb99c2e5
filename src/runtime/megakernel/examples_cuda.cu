// The CUDA megakernels of the example graphs, generated at build time.

#include "megakernels/layered_stack.h"
#include "megakernels/moe_routed.h"
#include "megakernels/splitk.h"
#include "runtime/megakernel/cuda_launch.cuh"

template struct evt::mk::CudaLaunch<evt::generated::splitk::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::moe_routed::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::layered_stack::Megakernel>;
