#pragma once
// The decode graph of a Qwen3-MoE model: the dense decode graph (graphs/dense_decode.evt.in) with
// its MLP groups (gate_up, down) and their act buffer and ACT event replaced by the sparse block's
// groups, events and buffers (docs/moe_decode.md): router tiles, a per-layer plan that routes
// every token (top-k) and sorts the (token, slot) rows by expert, gate/up and down tiles that
// each work for one routed expert, released by the plan's data-dependent events (the grids are
// bounded by the experts that can be routed), and a combine that adds the weighted expert outputs
// to the residual. A dense layer of the model is one expert of weight 1. Derived from the dense
// graph rather than written out again, so embedding, attention, the LM head and sampling stay the
// dense graph's as it changes; evt_moe_graph writes it out at build time for evt_codegen.

#include <map>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "model/config.h"
#include "model/decode_plan.h"
#include "model/decoder.h"
#include "util/status.h"

namespace evt::model {

Expected<ir::Graph> moe_decode_graph(ir::Graph dense);

// The MoE graph's dims for `config` (an MoE config), a tiling and a step of `tokens` tokens.
void bind_moe_dims(const ModelConfig& config, const Tiling& tiling, int64_t tokens,
                   std::map<std::string, int64_t>& dims);

// The MoE block of each layer of a traced step (Decoder::trace_next_step): its time from the
// layer's last o_proj task, when x_mid is complete and the router may start, to its last
// moe_combine_residual task, when x is; and how many gate/up tiles ran (only routed experts'
// tiles run, ceil(moe_intermediate_size / Tiling::rows_xi) of them per expert).
struct MoeBlockTime {
  int64_t layer = 0;
  double us = 0;
  int64_t gate_up_tiles = 0;
};
Expected<std::vector<MoeBlockTime>> moe_block_times(std::span<const StageTime> stages);

}  // namespace evt::model
