// The CUDA megakernels of the test-only graphs: a wrong wait count (the time-out test) and the
// prefetch prologue.

#include "megakernels/splitk_wrong_count.h"
#include "megakernels/staged_add.h"
#include "runtime/megakernel/cuda_launch.cuh"

template struct evt::mk::CudaLaunch<evt::generated::splitk_wrong_count::Megakernel>;
template struct evt::mk::CudaLaunch<evt::generated::staged_add::Megakernel>;
