#include "runtime/cuda/device_info.h"

#include <cuda_runtime.h>

#include "runtime/cuda/sm_probe_kernel.h"

namespace evt::runtime::cuda {

namespace {

Status check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status();
  return error("{} failed: {} ({})", call, cudaGetErrorString(e), cudaGetErrorName(e));
}
#define EVT_CUDA(call) EVT_RETURN_IF_ERROR(check((call), #call))

template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  ~DeviceBuffer() { cudaFree(ptr); }
};

}  // namespace

Expected<std::vector<DeviceInfo>> query_devices() {
  int count = 0;
  EVT_CUDA(cudaGetDeviceCount(&count));
  std::vector<DeviceInfo> out;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    EVT_CUDA(cudaGetDeviceProperties(&p, d));
    out.push_back({d, p.name, p.multiProcessorCount, p.major, p.minor, static_cast<int64_t>(p.totalGlobalMem),
                   p.l2CacheSize, static_cast<int64_t>(p.sharedMemPerBlockOptin), p.maxThreadsPerMultiProcessor});
  }
  return out;
}

Expected<SmProbe> probe_sms(int device, int blocks) {
  if (blocks < 1) return error("probe_sms needs at least one block, got {}", blocks);
  EVT_CUDA(cudaSetDevice(device));
  DeviceBuffer<int32_t> smid;
  DeviceBuffer<uint64_t> start, end;
  EVT_CUDA(cudaMalloc(&smid.ptr, blocks * sizeof(int32_t)));
  EVT_CUDA(cudaMalloc(&start.ptr, blocks * sizeof(uint64_t)));
  EVT_CUDA(cudaMalloc(&end.ptr, blocks * sizeof(uint64_t)));
  EVT_CUDA(cudaMemset(smid.ptr, 0xff, blocks * sizeof(int32_t)));  // -1: "this block never ran"
  EVT_CUDA(launch_sm_probe(blocks, smid.ptr, start.ptr, end.ptr));
  EVT_CUDA(cudaDeviceSynchronize());
  SmProbe probe{std::vector<int32_t>(blocks), std::vector<uint64_t>(blocks), std::vector<uint64_t>(blocks)};
  EVT_CUDA(cudaMemcpy(probe.smid.data(), smid.ptr, blocks * sizeof(int32_t), cudaMemcpyDeviceToHost));
  EVT_CUDA(cudaMemcpy(probe.start_ns.data(), start.ptr, blocks * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  EVT_CUDA(cudaMemcpy(probe.end_ns.data(), end.ptr, blocks * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  return probe;
}

}  // namespace evt::runtime::cuda
