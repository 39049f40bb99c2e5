#pragma once
// What the CUDA devices are, and a smoke test of the two device primitives the megakernel's
// backend builds on: the SM id (%smid) and the global nanosecond timer (%globaltimer).

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace evt::runtime::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t smem_per_block_optin_bytes = 0;
  int max_threads_per_sm = 0;
};

// Every visible device; an error names the CUDA call that failed and why.
Expected<std::vector<DeviceInfo>> query_devices();

// One block per SM records its %smid and %globaltimer before and after a short spin.
struct SmProbe {
  std::vector<int32_t> smid;
  std::vector<uint64_t> start_ns, end_ns;
};
Expected<SmProbe> probe_sms(int device, int blocks);

}  // namespace evt::runtime::cuda
