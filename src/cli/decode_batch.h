#pragma once
// The synthetic decode steps the benchmarks and the tuner time, how they time them, and the
// bandwidth their floors divide by.

#include <cstdint>
#include <random>
#include <string>

#include "model/config.h"
#include "model/decode_plan.h"
#include "model/decoder.h"

namespace evt::cli {

// B sequences of `ctx` cached positions each, one new token per sequence; pages laid out
// sequence after sequence (the cache needs batch * (ctx / page_size + 1) pages). The cache holds
// whatever an earlier step left, which costs the same.
model::StepBatch decode_batch(const model::ModelConfig& c, int64_t batch, int64_t ctx, int64_t page_size,
                              std::mt19937& rng);

// The median of `reps` steps of `batch` after `warmup` untimed ones: each step's device time on
// the GPU, its wall time on the CPU (whose steps report none). A failed step fails the command,
// its message after `what`.
double median_step_ms(model::Decoder& d, const model::StepBatch& batch, int warmup, int reps, const std::string& what);

#ifdef EVT_HAVE_CUDA
// The GPU a benchmark runs on and its streaming-read bandwidth in TB/s, measured now on a 4 GiB
// buffer (the floors' denominator) and printed. Fails `command` when there is no device.
struct DeviceRead {
  std::string name;
  int sms = 0;
  double tbps = 0;
};
DeviceRead measure_device_read(const std::string& command);
#endif

}  // namespace evt::cli
