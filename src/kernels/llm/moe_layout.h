#pragma once
// Where a decode layer's MLP weights are, for the tile functions of the MoE decode graph
// (model/moe_graph.h): a sparse layer's router and experts, or a dense layer's MLP seen as one
// expert that every token takes with weight 1. A Qwen3-MoE model may mix both kinds of layer
// (mlp_only_layers, decoder_sparse_step), and one view lets one code path serve both; with K = 1
// and a weight of exactly 1 the arithmetic is the dense MLP's.
//
// Each expert's matrices are stored as the dense MLP's are (weight_tiles.h): gate and up fused
// (2 inter rows x hidden) and down (hidden rows x inter), each tiled on its own, the experts'
// one after another. So an expert's tiles are contiguous, and a task that runs one expert
// streams one block of memory. An expert's matrix is one row panel (its tiles' size depends on
// the step's batch, the weights' layout cannot); the router and a dense layer's MLP are in
// panels of their tiles, as the dense model's projections are.

#include <cstdint>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/weight_tiles.h"

namespace evt::kernels::llm {

// The most experts a sparse layer may have, and a token be routed to: bounds loading checks, so
// that moe_plan's tables and one token's routing stay a few KiB of scratch (Qwen3-MoE models have
// 128 experts and top-8).
inline constexpr int64_t kMaxMoeExperts = 256;
inline constexpr int64_t kMaxMoeTopK = 16;

// Output rows per gate/up and per down tile of a layer's experts: a sparse layer's are tiled so that
// the experts a step can route to fill the workers, a dense layer's one expert (every token) as
// the dense model's MLP is.
EVT_HD inline int64_t moe_gate_up_rows(const int32_t* cfg, bool sparse) {
  return cfg[sparse ? kCfgMoeRowsXI : kCfgRowsI];
}
EVT_HD inline int64_t moe_down_rows(const int32_t* cfg, bool sparse) {
  return cfg[sparse ? kCfgMoeRowsDn : kCfgRowsH];
}

// The expert whose tile range [ptr[e], ptr[e + 1]) holds tile i, or -1 past the last: moe_plan
// filling tile_expert from its prefix sums in shared memory. The search is 16-ary: a round reads
// 15 probes (clamped to the range, so that no read waits behind a branch) and counts those at or
// before i, so 128 or 256 experts take two rounds.
EVT_HD inline int64_t moe_tile_expert(const int32_t* ptr, int64_t experts, int64_t i) {
  const int32_t total = ptr[experts];
  int32_t lo = 0, hi = static_cast<int32_t>(experts) - 1;  // the last e with ptr[e] <= i
  while (lo < hi) {
    const int32_t step = (hi - lo) / 16 + 1;
    int32_t begins[15];
    EVT_UNROLL
    for (int k = 0; k < 15; ++k) begins[k] = ptr[min_of(lo + (k + 1) * step, hi)];
    int32_t below = 0;  // probes at or before i: a prefix of them, since ptr rises
    EVT_UNROLL
    for (int k = 0; k < 15; ++k) below += begins[k] <= i;
    const int32_t next = below == 0 ? lo : min_of(lo + below * step, hi);
    hi = min_of(next + step - 1, hi);
    lo = next;
  }
  return i < total ? lo : -1;
}

struct LayerMlp {
  const uint16_t* router = nullptr;   // tiled, experts x hidden; null in a dense layer
  const uint16_t* gate_up = nullptr;  // expert 0's fused gate/up matrix
  const uint16_t* down = nullptr;     // expert 0's down matrix
  int64_t experts = 1, top_k = 1, inter = 0;
  TiledShape router_shape, gate_up_shape, down_shape;  // one expert's matrices

  EVT_HD bool sparse() const { return router != nullptr; }
  // The experts' matrices one after another: expert e's starts e matrices in.
  EVT_HD const uint16_t* expert_gate_up(int64_t e) const { return gate_up + e * gate_up_shape.bytes() / 2; }
  EVT_HD const uint16_t* expert_down(int64_t e) const { return down + e * down_shape.bytes() / 2; }
};

// Layer `layer`'s MLP, from cfg (kCfgWords words) and the wtab rows (kWeightColumns each). Every
// word either kind of layer needs is loaded before any is used, and the kind picks among them by
// selects: with a branch on the router's address, the loads of each arm waited for that one, a
// round trip more before every MoE tile's first load of its inputs.
EVT_HD inline LayerMlp layer_mlp(const int32_t* cfg, const int64_t* wtab, int64_t layer, int64_t hidden) {
  const int64_t* row = wtab + layer * kWeightColumns;
  const auto at = [&](WeightColumn column) {
    return reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(row[column]));
  };
  const uint16_t *router = at(kWrouter), *dense_gate_up = at(kWgateUp), *dense_down = at(kWdown);
  const uint16_t *experts_gate_up = at(kWexpertsGateUp), *experts_down = at(kWexpertsDown);
  const int64_t dense_inter = cfg[kCfgMoeDenseInter], rows_i = cfg[kCfgRowsI], rows_h = cfg[kCfgRowsH];
  const int64_t experts = cfg[kCfgMoeExperts], top_k = cfg[kCfgMoeTopK], inter = cfg[kCfgMoeInter];
  const int64_t rows_e = cfg[kCfgMoeRowsE];
  const bool sparse = router != nullptr;
  LayerMlp m;
  m.router = router;
  m.gate_up = sparse ? experts_gate_up : dense_gate_up;
  m.down = sparse ? experts_down : dense_down;
  m.experts = sparse ? experts : 1;
  m.top_k = sparse ? top_k : 1;
  m.inter = sparse ? inter : dense_inter;
  // A sparse layer's expert matrices are one panel each; a dense layer's are in its tiles' panels.
  m.router_shape = sparse ? tiled_shape(experts, hidden, rows_e) : TiledShape{};
  m.gate_up_shape = tiled_shape(2 * m.inter, hidden, sparse ? 0 : 2 * rows_i);
  m.down_shape = tiled_shape(hidden, m.inter, sparse ? 0 : rows_h);
  return m;
}

// A routed expert's gate/up tiles and down tiles in layer m (moe_plan.h).
EVT_HD inline int64_t moe_gate_up_tiles(const int32_t* cfg, const LayerMlp& m) {
  const int64_t rows = moe_gate_up_rows(cfg, m.sparse());
  return (m.inter + rows - 1) / rows;
}
EVT_HD inline int64_t moe_down_tiles(const int32_t* cfg, const LayerMlp& m, int64_t hidden) {
  const int64_t rows = moe_down_rows(cfg, m.sparse());
  return (hidden + rows - 1) / rows;
}

// The plan's entry for a gate/up tile in tile_expert (moe_plan.h): its expert and that expert's
// sorted rows [row0, row0 + rows), or expert -1 and no rows past the last routed expert's tiles.
// The rows beside the expert, so that a tile's body learns both in one round trip rather than
// reading exp_indptr[e] after e.
inline constexpr int64_t kTileEntryWords = 3;
struct MoeTileEntry {
  int64_t expert = -1, row0 = 0, rows = 0;
};
EVT_HD inline MoeTileEntry moe_tile_entry(const int32_t* layer_entries, int64_t i) {
  const int32_t* at = layer_entries + i * kTileEntryWords;
  return MoeTileEntry{at[0], at[1], at[2]};
}
// Writes entry i: expert e (-1 for none) and its rows [start[e], start[e + 1]) of a table of the
// experts' first sorted rows (exp_indptr, or the plan's copy of it in shared memory).
EVT_HD inline void put_moe_tile_entry(int32_t* layer_entries, int64_t i, int32_t e, const int32_t* start) {
  int32_t* at = layer_entries + i * kTileEntryWords;
  at[0] = e;
  at[1] = e < 0 ? 0 : start[e];
  at[2] = e < 0 ? 0 : start[e + 1] - start[e];
}

// Down tile i's entry (of dn_tiles an expert): that of its routed expert's first gate/up tile (of
// gu_tiles) in the layer's row of tile_expert (max_gu entries); none past the last routed expert.
// One load where a search of dn_ptr took several dependent rounds.
EVT_HD inline MoeTileEntry moe_down_tile_entry(const int32_t* layer_entries, int64_t max_gu, int64_t gu_tiles,
                                               int64_t dn_tiles, int64_t i) {
  const int64_t first = i / dn_tiles * gu_tiles;
  return first < max_gu ? moe_tile_entry(layer_entries, first) : MoeTileEntry{};
}

}  // namespace evt::kernels::llm
