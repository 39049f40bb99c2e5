// GPU suite (label gpu): the device query and the %smid / %globaltimer primitives.

#include "runtime/cuda/device_info.h"

#include <gtest/gtest.h>

#include <set>

namespace evt::runtime::cuda {
namespace {

TEST(CudaDevices, QueryFindsAHopperDevice) {
  auto devices = query_devices();
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_FALSE(devices->empty());
  const DeviceInfo& d = devices->front();
  EXPECT_GT(d.sm_count, 0);
  EXPECT_EQ(d.cc_major, 9) << d.name << ": kernels are built for sm_90a";
  EXPECT_GT(d.memory_bytes, int64_t{1} << 30);
  EXPECT_GT(d.smem_per_block_optin_bytes, 48 * 1024);
}

TEST(CudaDevices, ProbeRecordsSmIdsAndTimer) {
  auto devices = query_devices();
  ASSERT_TRUE(devices.ok() && !devices->empty());
  const int sms = devices->front().sm_count;
  auto probe = probe_sms(0, 2 * sms);
  ASSERT_TRUE(probe.ok()) << probe.status().message();
  std::set<int32_t> seen;
  for (size_t b = 0; b < probe->smid.size(); ++b) {
    ASSERT_GE(probe->smid[b], 0) << "block " << b << " never ran";
    ASSERT_LT(probe->smid[b], sms);
    EXPECT_GE(probe->end_ns[b] - probe->start_ns[b], 20000u) << "block " << b;
    seen.insert(probe->smid[b]);
  }
  EXPECT_GT(seen.size(), static_cast<size_t>(sms / 2)) << "blocks should spread over the SMs";
}

TEST(CudaDevices, BadArgumentIsAnError) { EXPECT_FALSE(probe_sms(0, 0).ok()); }

}  // namespace
}  // namespace evt::runtime::cuda
