#pragma once
// The decode graph of a Qwen3-MoE model: the dense decode graph (graphs/dense_decode.evt.in)
// with its MLP groups replaced by the sparse block's. Derived from the dense graph rather than
// written out again, so embedding, attention, the LM head and sampling stay the dense graph's as
// it changes. The CPU backend runs it on the CPU executor with the registry's references; its MLP
// tile functions have no device bodies yet, so no megakernel is generated from it.
//
//   gate_up (L, NI) gate_up_silu  ->  (L, T) moe_gate_up: token t's norm, routing and the
//                                     activations of its experts (kernels/llm/moe_gate_up.cc)
//   down    (L, NH) down_proj     ->  (L, NH) moe_down: the weighted sum of the experts' down
//                                     projections plus the residual (kernels/llm/moe_down.cc)
//
// New dims: XK (route slots per token: top-k, at least 1) and XA (act values per token: the
// widest of the dense layers' intermediate size and top-k x moe_intermediate_size). New buffers:
// route_ids (T, XK) i32 and route_w (T, XK) f32; act becomes (T, XA); ACT awaits the T tokens.

#include <map>
#include <string>

#include "ir/graph.h"
#include "model/config.h"
#include "util/status.h"

namespace evt::model {

Expected<ir::Graph> moe_decode_graph(ir::Graph dense);

// The MoE graph's dims for `config` (an MoE config): XK and XA.
void bind_moe_dims(const ModelConfig& config, std::map<std::string, int64_t>& dims);

}  // namespace evt::model
