#pragma once
// The SM probe's kernel launch, kept apart so that .cu files include no framework headers.

#include <cuda_runtime.h>

#include <cstdint>

namespace evt::runtime::cuda {

// One block per index records %smid and %globaltimer before and after a ~20 us bounded spin.
cudaError_t launch_sm_probe(int blocks, int32_t* smid, uint64_t* start_ns, uint64_t* end_ns);

}  // namespace evt::runtime::cuda
