#include "cli/decode_batch.h"

#include <fmt/format.h>

#include <chrono>
#include <vector>

#include "cli/command_exit.h"
#include "cli/stats.h"

#ifdef EVT_HAVE_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/read_bandwidth.h"
#endif

namespace evt::cli {

model::StepBatch decode_batch(const model::ModelConfig& c, int64_t batch, int64_t ctx, int64_t page_size,
                              std::mt19937& rng) {
  model::StepBatch b;
  const int64_t pages = ctx / page_size + 1;
  b.pages_per_seq = pages;
  for (int64_t s = 0; s < batch; ++s) {
    b.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size)));
    b.positions.push_back(static_cast<int32_t>(ctx));
    b.token_seq.push_back(static_cast<int32_t>(s));
    b.logit_rows.push_back(static_cast<int32_t>(s));
    for (int64_t p = 0; p < pages; ++p) b.block_table.push_back(static_cast<int32_t>(s * pages + p));
  }
  return b;
}

double median_step_ms(model::Decoder& d, const model::StepBatch& batch, int warmup, int reps, const std::string& what) {
  std::vector<double> ms;
  for (int r = -warmup; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    auto out = d.step(batch, false);
    if (!out.ok()) fail(kFailed, fmt::format("{}: {}", what, out.status().message()));
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r >= 0) ms.push_back(out->device_ms > 0 ? out->device_ms : wall);
  }
  return median(ms);
}

#ifdef EVT_HAVE_CUDA
DeviceRead measure_device_read(const std::string& command) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) fail(kUsage, command + " needs a CUDA device");
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  void* data = nullptr;
  const int64_t bytes = int64_t{4} << 30;
  if (cudaMalloc(&data, bytes) != cudaSuccess || cudaMemset(data, 0x5a, bytes) != cudaSuccess) {
    fail(kFailed, "cannot allocate 4 GiB for the bandwidth measurement");
  }
  double tbps = 0;
  const cudaError_t e = runtime::cuda::measure_read_bandwidth(data, bytes, 20, &tbps);
  cudaFree(data);
  if (e != cudaSuccess) fail(kFailed, fmt::format("bandwidth measurement: {}", cudaGetErrorString(e)));
  fmt::print("device: {}, {} SMs; streaming read measured at {:.2f} TB/s\n", prop.name, prop.multiProcessorCount, tbps);
  return {prop.name, prop.multiProcessorCount, tbps};
}
#endif

}  // namespace evt::cli
