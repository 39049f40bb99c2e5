#pragma once
// The generated decode megakernels, one per (graph, head dim): the dense decode graph
// (graphs/dense_decode.evt.in) and the MoE decode graph derived from it (moe_graph.h).
// Everything else about a model's size is a run-time dim.

#include <utility>

#include "megakernels/dense_decode_d128.h"
#include "megakernels/dense_decode_d64.h"
#include "megakernels/moe_decode_d128.h"
#include "megakernels/moe_decode_d64.h"
#include "model/config.h"

namespace evt::model {

// Calls f.template operator()<MK>() with the megakernel of `config`, whose head dim
// check_decodable has accepted (64 or 128).
template <class F>
auto with_decode_megakernel(const ModelConfig& config, F&& f) {
  if (config.has_moe_layers()) {
    if (config.head_dim == 64) return f.template operator()<generated::moe_decode_d64::Megakernel>();
    return f.template operator()<generated::moe_decode_d128::Megakernel>();
  }
  if (config.head_dim == 64) return f.template operator()<generated::dense_decode_d64::Megakernel>();
  return f.template operator()<generated::dense_decode_d128::Megakernel>();
}

}  // namespace evt::model
