#include "model/moe_graph.h"

#include <algorithm>

#include "ir/text_form.h"
#include "kernels/llm/moe_router.h"
#include "util/int_math.h"

namespace evt::model {

namespace {

// The sparse block (docs/moe_decode.md), in the graph's text form, appended to the dense graph
// once its MLP groups are gone. It reads x_mid and MID and writes x and X as they did. Routing
// decides which expert tiles exist and what they wait for (seed 001's two mechanisms): EXP[l]
// releases the routed experts' gate/up tiles through a range trigger, each gate/up tile notifies
// its own expert's ACTX, which releases that expert's down tiles, and moe_plan sets how many tiles
// each count waits for. Tiles of experts no token chose are never released (the static schedule
// skips them). EXP is one element a layer, not one an expert: the plan releases every routed
// expert at once, and under dynamic scheduling a fire per expert (a returning add, two table
// loads) made the plan's leader take 0.73 ms a layer for 128 experts. The edges keep their layer
// (ir::layer_offset), so the groups are ordered layer by layer rather than as wholes, which would
// close a cycle through the layer chain. moe_plan routes every token of the layer itself (top-k
// in shared memory) rather than after a task per token: the hand-off between them cost more than
// the routing.
constexpr const char* kMoeBlock = R"evt(
XE = dim()      # experts of a sparse layer (a dense layer is one)
XK = dim()      # route slots per token: top-k
XI = dim()      # act_s values per row: the widest expert (the dense layers' intermediate size or moe_intermediate_size)
NR = dim()      # router tiles: tiles of experts x passes of tokens
MAXGU = dim()   # gate/up tiles per layer: the experts that can be routed x tiles per expert
MAXDN = dim()   # down tiles per layer

router_logits = buffer((T, XE), f32)
route_ids = buffer((T, XK), i32)
route_w = buffer((T, XK), f32)
exp_indptr = buffer((XE+1,), i32)      # expert e's (token, slot) rows, sorted by expert
perm = buffer((T*XK,), i32)            # sorted row -> token
sorted_w = buffer((T*XK,), f32)        # sorted row -> routing weight
pos = buffer((T, XK), i32)             # (token, slot) -> sorted row
# Per layer: a trigger's index buffers must hold still while a skipped static task may still read them.
gu_ptr = buffer((L, XE+1), i32)        # expert e's gate/up tiles [gu_ptr[l, e], gu_ptr[l, e+1])
dn_ptr = buffer((L, XE+1), i32)        # ... and down tiles
tile_expert = buffer((L, MAXGU, 3), i32)  # gate/up tile -> its expert and the expert's sorted rows (first, count)
act_s = buffer((T*XK, XI), f32)
y_s = buffer((T*XK, H), f32)

RLOG = event((L,), wait_count=NR)
PLANNED = event((L,), wait_count=1)
EXP = event((L,), wait_count=1)             # the layer's routed experts' gate/up tiles may run
ACTX = event((L, XE), wait_count=runtime)   # expert e's activations: its gate/up tiles (moe_plan sets)
DONE = event((L,), wait_count=runtime)      # every down tile of the layer (moe_plan sets)

moe_router = call_device(moe_router, tiles=(L, NR), reads=(cfg, wtab, x_mid), writes=(router_logits,),
                         in_edges={MID: "ln->l"}, out_edges={RLOG: "ln->l"}, layered=true)
moe_plan = call_device(moe_plan, tiles=(L,), reads=(cfg, wtab, x_mid, router_logits),
                       writes=(route_ids, route_w, exp_indptr, perm, sorted_w, pos, gu_ptr, dn_ptr, tile_expert),
                       in_edges={RLOG: "l->l"}, out_edges={PLANNED: "l->l", EXP: "l->l"}, sets=(ACTX, DONE),
                       layered=true)
# A static gate/up task waits for its layer's one EXP element before it reads gu_ptr (the range);
# a down task reads dn_ptr to find its ACTX element, so PLANNED comes first there.
moe_gate_up = call_device(moe_expert_gate_up, tiles=(L, MAXGU), reads=(cfg, wtab, x_mid, exp_indptr, perm, gu_ptr, tile_expert),
                          writes=(act_s,),
                          in_edges={EXP: "l->[l*MAXGU, l*MAXGU + gu_ptr[l, XE])"},
                          out_edges={ACTX: "li->(l, tile_expert[l, i, 0])"}, layered=true, schedule=dynamic)
moe_down = call_device(moe_expert_down, tiles=(L, MAXDN), reads=(cfg, wtab, act_s, exp_indptr, sorted_w, dn_ptr, tile_expert),
                       writes=(y_s,),
                       in_edges={PLANNED: "li->l", ACTX: "le->[l*MAXDN + dn_ptr[l, e], l*MAXDN + dn_ptr[l, e+1])"},
                       out_edges={DONE: "li->l"}, layered=true, schedule=dynamic)
moe_combine_residual = call_device(moe_combine_residual, tiles=(L, NH), reads=(cfg, y_s, pos, x_mid), writes=(x,),
                                   in_edges={DONE: "ln->l"}, out_edges={X: "ln->(l+1)"}, layered=true)
)evt";

template <class T>
bool erase_named(std::vector<T>& items, const std::string& name) {
  return std::erase_if(items, [&](const T& x) { return x.name == name; }) == 1;
}

}  // namespace

Expected<ir::Graph> moe_decode_graph(ir::Graph g) {
  const bool found = erase_named(g.groups, "gate_up") && erase_named(g.groups, "down") &&
                     erase_named(g.buffers, "act") && erase_named(g.events, "ACT");
  if (!found) {
    return error("{}: the MoE decode graph replaces the groups gate_up and down, the buffer act and the event ACT; "
                 "one of them is missing",
                 g.name);
  }
  g.name += "_moe";
  return ir::parse_graph(ir::print_graph(g) + kMoeBlock, g.name);
}

void bind_moe_dims(const ModelConfig& c, const Tiling& t, int64_t tokens, std::map<std::string, int64_t>& dims) {
  const int64_t experts = std::max<int64_t>(1, c.moe->num_experts);
  const int64_t top_k = std::max<int64_t>(1, c.moe->num_experts_per_tok);
  const int64_t routed = std::min(experts, tokens * top_k);  // experts that can get a token
  dims["XE"] = experts;
  dims["XK"] = top_k;
  dims["XI"] = std::max(c.intermediate_size, c.moe->moe_intermediate_size);
  // A tile of experts a pass of tokens each, as router_tile maps them.
  dims["NR"] = kernels::llm::router_tiles_per_pass(static_cast<int32_t>(experts), static_cast<int32_t>(t.rows_e)) *
               ceil_div(tokens, kernels::llm::kPassTokens);
  // A dense layer is one expert of intermediate_size, tiled as the dense MLP (moe_layout.h).
  dims["MAXGU"] = std::max(routed * ceil_div(c.moe->moe_intermediate_size, t.rows_xi),
                           ceil_div(c.intermediate_size, t.rows_i));
  dims["MAXDN"] = std::max(routed * ceil_div(c.hidden_size, t.rows_dn), ceil_div(c.hidden_size, t.rows_h));
}

Expected<std::vector<MoeBlockTime>> moe_block_times(std::span<const StageTime> stages) {
  std::map<int64_t, const StageTime*> ready, done, gate_up;  // by layer
  for (const StageTime& s : stages) {
    if (s.group == "o_proj") ready[s.layer] = &s;
    if (s.group == "moe_combine_residual") done[s.layer] = &s;
    if (s.group == "moe_gate_up") gate_up[s.layer] = &s;
  }
  if (done.empty()) return error("the traced step ran no moe_combine_residual task: not an MoE decode graph's step");
  std::vector<MoeBlockTime> out;
  for (const auto& [layer, combine] : done) {
    auto it = ready.find(layer);
    if (it == ready.end()) return error("the traced step ran no o_proj task in layer {}", layer);
    auto tiles = gate_up.find(layer);
    out.push_back({layer, combine->end_us - it->second->end_us, tiles == gate_up.end() ? 0 : tiles->second->tasks});
  }
  return out;
}

}  // namespace evt::model
