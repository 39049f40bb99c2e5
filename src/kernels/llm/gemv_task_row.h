#pragma once
// How a projection's registry row names its shared task (TileFunction::device_task): every
// GemvTask runs through the one gemv_run and gemv_stream of kernels/llm/gemv.h.

#include "kernels/registry.h"

namespace evt::kernels::llm {

inline SharedTask gemv_shared_task() {
  return SharedTask{.type = "evt::kernels::llm::GemvTask",
                    .run = "evt::kernels::llm::gemv_run",
                    .stream = "evt::kernels::llm::gemv_stream"};
}

}  // namespace evt::kernels::llm
