#include "cli/devices_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <set>

#ifdef EVT_HAVE_CUDA
#include "runtime/cuda/device_info.h"
#endif

namespace evt::cli {

namespace {

struct DevicesOptions {
  bool probe = false;
};

void run_devices(const DevicesOptions& o) {
#ifdef EVT_HAVE_CUDA
  auto devices = runtime::cuda::query_devices();
  if (!devices.ok()) {
    fmt::print(stderr, "error: {}\n", devices.status().message());
    throw CLI::RuntimeError(1);
  }
  if (devices->empty()) fmt::print("no CUDA devices\n");
  for (const auto& d : *devices) {
    fmt::print("{}: {}, sm_{}{}, {} SMs, {:.1f} GiB, L2 {:.0f} MiB, {} KiB shared memory per block (opt-in)\n", d.index,
               d.name, d.cc_major, d.cc_minor, d.sm_count, d.memory_bytes / double(1 << 30), d.l2_bytes / double(1 << 20),
               d.smem_per_block_optin_bytes / 1024);
    if (!o.probe) continue;
    auto probe = runtime::cuda::probe_sms(d.index, d.sm_count);
    if (!probe.ok()) {
      fmt::print(stderr, "error: device {}: {}\n", d.index, probe.status().message());
      throw CLI::RuntimeError(1);
    }
    const std::set<int32_t> sms(probe->smid.begin(), probe->smid.end());
    uint64_t shortest = UINT64_MAX;
    for (size_t b = 0; b < probe->smid.size(); ++b) shortest = std::min(shortest, probe->end_ns[b] - probe->start_ns[b]);
    fmt::print("   probe: {} blocks ran on {} distinct SMs (ids {}..{}); shortest block {:.1f} us by %globaltimer\n",
               probe->smid.size(), sms.size(), *sms.begin(), *sms.rbegin(), shortest / 1e3);
  }
#else
  (void)o;
  fmt::print(stderr, "error: this eventide was built without CUDA (nvcc was not found at build time)\n");
  throw CLI::RuntimeError(1);
#endif
}

}  // namespace

void add_devices_command(CLI::App& app) {
  auto opts = std::make_shared<DevicesOptions>();
  CLI::App* cmd = app.add_subcommand("devices", "List the CUDA devices this binary sees");
  cmd->add_flag("--probe", opts->probe,
                "also launch one block per SM that records its SM id and %globaltimer, as a smoke test");
  cmd->callback([opts] { run_devices(*opts); });
}

}  // namespace evt::cli
