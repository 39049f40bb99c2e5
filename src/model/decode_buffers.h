#pragma once
// Binding a decode graph's generated megakernel `MK` (decode_megakernels.h) for one step: its
// dims in the graph's order from a StepPlan, and the bytes each buffer takes. Shared by the CPU
// and CUDA backends, which differ only in where the memory lives.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/decode_plan.h"
#include "model/decoder.h"
#include "runtime/megakernel/instance.h"
#include "runtime/megakernel/trace.h"

namespace evt::model {

// The generated code's schedule of a mode that runs it (every mode but the reference).
constexpr mk::Schedule schedule_of(Exec e) {
  return e == Exec::kMegakernelDynamic ? mk::kDynamic
         : e == Exec::kMegakernelMixed ? mk::kPerGroup
         : e == Exec::kMegakernel      ? mk::kStatic
                                       : mk::kKernels;
}

template <class MK>
Expected<std::vector<int64_t>> ordered_dims(const StepPlan& plan) {
  std::vector<int64_t> dims;
  for (int d = 0; d < MK::num_dims; ++d) {
    auto it = plan.dims.find(MK::dim_name(d));
    if (it == plan.dims.end()) return error("the decode plan has no value for the graph's dim {}", MK::dim_name(d));
    dims.push_back(it->second);
  }
  return dims;
}

// Parameters with every shape set and no memory bound yet.
template <class MK>
Expected<mk::ParamsOf<MK>> unbound_params(const StepPlan& plan) {
  EVT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ordered_dims<MK>(plan));
  const std::vector<void*> none(MK::num_buffers, nullptr);
  return mk::make_params<MK>(dims, none);
}

template <class MK>
int64_t buffer_bytes(const mk::ParamsOf<MK>& p, int b) {
  return p.buffers[b].numel * MK::buffer_element_bytes(b);
}

template <class MK>
int buffer_index(const std::string& name) {
  for (int b = 0; b < MK::num_buffers; ++b) {
    if (name == MK::buffer_name(b)) return b;
  }
  return -1;
}

// A traced launch's tasks by group and layer, in microseconds from its first task.
template <class MK>
std::vector<StageTime> stage_times(const mk::ParamsOf<MK>& p, const std::vector<mk::TraceEvent>& trace) {
  const std::vector<mk::StageSpan> spans =
      mk::stage_spans(trace, [&](int g, int64_t linear) { return MK::task_layer(p, g, linear); });
  uint64_t origin = UINT64_MAX;
  for (const mk::StageSpan& s : spans) origin = std::min(origin, s.start_ns);
  std::vector<StageTime> out;
  for (const mk::StageSpan& s : spans) {
    out.push_back({MK::group_name(s.group), s.layer, static_cast<double>(s.start_ns - origin) / 1e3,
                   static_cast<double>(s.end_ns - origin) / 1e3, s.tasks});
  }
  return out;
}

// What a traced step returns: the trace as a Chrome trace written to `path` (none when it is
// empty), and its stages (Decoder::trace_next_step).
template <class MK>
Expected<std::vector<StageTime>> finish_trace(const mk::ParamsOf<MK>& p, const std::vector<mk::TraceEvent>& trace,
                                              const std::string& path) {
  if (!path.empty()) {
    EVT_RETURN_IF_ERROR(
        mk::write_chrome_trace(path, trace, [&](int g, int64_t linear) { return MK::task_name(p, g, linear); }));
  }
  return stage_times<MK>(p, trace);
}

}  // namespace evt::model
