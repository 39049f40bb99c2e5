#pragma once
// A generated megakernel on a CUDA device: one persistent grid, sized for co-residency from the
// occupancy API (asserted), scheduler memory that only grows, an epoch per launch instead of a
// reset pass, and the device's error record turned into a Status. Host code (compiled by the host
// compiler); the kernel itself is instantiated in a .cu file through CudaLaunch.

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "runtime/megakernel/cuda_launch.h"
#include "runtime/megakernel/instance.h"

namespace evt::mk {

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  return error("{} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
#define EVT_CUDA_RETURN(call) EVT_RETURN_IF_ERROR(::evt::mk::cuda_status((call), #call))

// Zero-initialized device words, freed on destruction.
class DeviceWords {
 public:
  DeviceWords() = default;
  DeviceWords(const DeviceWords&) = delete;
  DeviceWords(DeviceWords&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  DeviceWords& operator=(const DeviceWords&) = delete;
  ~DeviceWords() {
    if (data_) cudaFree(data_);
  }
  // Ensures room for `n` words; new memory is zero (which no epoch reads as current).
  Status reserve(size_t n) {
    if (n <= size_) return Status();
    if (data_) cudaFree(data_);
    data_ = nullptr;
    size_ = 0;
    EVT_CUDA_RETURN(cudaMalloc(&data_, n * sizeof(uint64_t)));
    EVT_CUDA_RETURN(cudaMemset(data_, 0, n * sizeof(uint64_t)));
    size_ = n;
    return Status();
  }
  uint64_t* data() const { return data_; }

 private:
  uint64_t* data_ = nullptr;
  size_t size_ = 0;
};

template <class MK>
class CudaMegakernel {
 public:
  struct Options {
    bool dynamic = false;
    int blocks = 0;  // 0: one per SM
    int64_t spin_limit_ns = 1'000'000'000;
    cudaStream_t stream = nullptr;
  };

  static Expected<std::unique_ptr<CudaMegakernel>> create(int device = 0) {
    auto k = std::unique_ptr<CudaMegakernel>(new CudaMegakernel());
    EVT_CUDA_RETURN(cudaSetDevice(device));
    EVT_CUDA_RETURN(cudaDeviceGetAttribute(&k->sms_, cudaDevAttrMultiProcessorCount, device));
    EVT_CUDA_RETURN(CudaLaunch<MK>::blocks_per_sm(&k->blocks_per_sm_));
    if (k->blocks_per_sm_ < 1) return error("the megakernel does not fit on an SM (occupancy 0)");
    EVT_RETURN_IF_ERROR(k->state_.reserve((sizeof(SchedulerState) + 7) / 8));
    return k;
  }

  int sms() const { return sms_; }
  int max_coresident_blocks() const { return sms_ * blocks_per_sm_; }

  // `p.buffers[].data` are device pointers.
  Status run(ParamsOf<MK> p, const Options& o) {
    if (o.dynamic && !MK::dynamic_supported) return error("this megakernel has no dynamic schedule");
    const int blocks = o.blocks > 0 ? o.blocks : sms_;
    // Spinning blocks deadlock unless every block of the grid is resident at once.
    if (blocks > max_coresident_blocks()) {
      return error("a grid of {} blocks cannot be co-resident: at most {} ({} SMs x {} blocks)", blocks,
                   max_coresident_blocks(), sms_, blocks_per_sm_);
    }
    const Footprint<MK> f(p);
    counters_.resize(MK::num_events);
    targets_.resize(MK::num_events);
    for (int e = 0; e < MK::num_events; ++e) {
      const size_t n = static_cast<size_t>(std::max<int64_t>(f.elements[e], 1));
      EVT_RETURN_IF_ERROR(counters_[e].reserve(n));
      p.counters[e] = counters_[e].data();
      p.targets[e] = nullptr;
      if (MK::runtime_count(e)) {
        EVT_RETURN_IF_ERROR(targets_[e].reserve(n));
        p.targets[e] = targets_[e].data();
      }
    }
    const size_t tasks = static_cast<size_t>(std::max<int64_t>(f.tasks, 1));
    EVT_RETURN_IF_ERROR(pending_.reserve(tasks));
    EVT_RETURN_IF_ERROR(slots_.reserve(tasks));
    auto* state = reinterpret_cast<SchedulerState*>(state_.data());
    const LaunchArgs a{++epoch_, o.spin_limit_ns, state, slots_.data(), pending_.data()};
    EVT_CUDA_RETURN(CudaLaunch<MK>::launch(p, a, blocks, o.dynamic, o.stream));
    EVT_CUDA_RETURN(cudaStreamSynchronize(o.stream));
    SchedulerState s;
    EVT_CUDA_RETURN(cudaMemcpy(&s, state, sizeof s, cudaMemcpyDeviceToHost));
    if (s.abort == (epoch_tag(epoch_) | 1)) return Status::error(describe_failure<MK>(s.error));
    if (!o.dynamic) return Status();
    return check_dynamic_completion<MK>(p, s, epoch_, [&](int e) {
      std::vector<uint64_t> c(f.elements[e]);
      cudaMemcpy(c.data(), counters_[e].data(), c.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost);
      return c;
    });
  }

 private:
  CudaMegakernel() = default;
  int sms_ = 0, blocks_per_sm_ = 0;
  std::vector<DeviceWords> counters_, targets_;
  DeviceWords pending_, slots_, state_;
  uint32_t epoch_ = 0;
};

}  // namespace evt::mk
