// The CUDA megakernels of the scheduling benchmarks (bench/graphs), generated at build time.

#include "megakernels/branches.h"
#include "megakernels/chain100.h"
#include "megakernels/hops100.h"
#include "megakernels/sched_fanin.h"
#include "megakernels/sched_independent.h"
#include "runtime/megakernel/cuda_launch.cuh"

template struct evt::mk::CudaLaunch<evt::generated::sched_independent::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::sched_fanin::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::chain100::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::hops100::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::branches::Megakernel>;
