#pragma once
// The run-time layout the dense decode graph (src/model/graphs/dense_decode.evt.in) and its tile
// bodies agree on: what each word of `cfg` holds and which weight each column of `wtab` points
// to. The host fills both (model/decode_step.h); bodies read them. Tile sizes live here, not in
// the compiled kernel, so a tuning table can change them per batch without recompiling.

#include <cstdint>

#include "kernels/tile_body.h"

namespace evt::kernels::llm {

// The block the decode bodies are written for: one per SM, 11 warps to run the bodies, and up to
// kDecodeScratchBytes of the SM's 227 KiB of shared memory as scratch for the projections' staged
// activations and sums (gemv.h). With the loader warp the block has 12 warps, three on each of the
// SM's four scheduler partitions, whose register files are 64 KiB each: so ptxas may give a thread
// 168 registers. A 13th warp puts four on one partition and caps every thread at 128 (at 12 task
// warps the dense static entry then had 128 registers and a 496-byte stack; bench/README.md).
// kDecodeScratchBytes is the most a launch allows (it would leave the weight ring two 32 KiB
// stages); a step asks for less (model/decode_plan.cc's step_scratch), so that the ring keeps
// three or more, and no less than attention's 57 KiB at head_dim 128 (which B = 1 asks for).
inline constexpr int kDecodeThreads = 352;
inline constexpr int kDecodeScratchBytes = 159 * 1024;
// The sets of 16 tokens a projection's pass takes in the decode megakernels' entry for steps of
// more than 16 tokens (gemv.h): B = 64 streams each weight once rather than four times.
inline constexpr int kWidePassSets = 4;

// Words of the i32 `cfg` buffer.
enum Cfg : int {
  kCfgLayers = 0,     // L: the final norm reads x[L % 2]
  kCfgEpsBits,        // RMSNorm epsilon, float bits
  kCfgQkNorm,         // 1: Qwen3's per-head RMSNorm on q and k
  kCfgPageSize,       // KV cache positions per page
  kCfgKvSplitLen,     // positions per attention KV split
  kCfgQkvSplitLen,    // K elements per QKV split (a multiple of 32: whole weight tiles)
  kCfgRowsH,          // output rows per tile of the H-wide groups (embedding, o_proj, down): a multiple of 16
  kCfgRowsI,          // rows of I per gate/up tile: a multiple of 8
  kCfgRowsV,          // vocab rows per lm_head round (a row panel of its weights): a multiple of 16
  kCfgHeads,          // HQ
  kCfgKvHeads,        // HKV
  kCfgHeadDim,        // D
  kCfgAttentionFinishes,  // 1: a decode step (one token per sequence): attention finishes its q, k and v (no qkv_finish tiles)
  kCfgFinishPairs,        // (head, token) pairs per qkv_finish tile (steps with a prefill chunk)
  kCfgLmRounds,           // rounds of kCfgRowsV rows per lm_head tile (gemv.h)
  kCfgAttentionRuns,      // attention's runs of tokens, its tile dim 1 (attention_run_stride); 0: a token a tile
  // Qwen3-MoE (model/moe_graph.h); 0 in a dense model. From the end, so that the dense words
  // above can grow without moving these.
  kCfgMoeRowsDn = 24,      // rows of H per moe_expert_down tile of a sparse layer: a multiple of 16
  kCfgMoeRowsE = 25,       // experts per moe_router tile: a multiple of 16 (docs/moe_decode.md)
  kCfgMoeRowsXI = 26,      // rows of a sparse layer's expert width per moe_expert_gate_up tile: a multiple of 8
  kCfgMoeDenseInter = 27,  // intermediate_size of the model's dense layers (its sparse ones have experts)
  kCfgMoeNormTopk = 28,  // 1: the top-k routing weights are renormalized to sum to 1
  kCfgMoeInter = 29,     // moe_intermediate_size
  kCfgMoeTopK = 30,      // experts per token
  kCfgMoeExperts = 31,   // experts per sparse layer
  kCfgWords = 32,        // the buffer's size in the graph
};

// Decode attention's tile dim 1 is a run of the step's tokens: run r takes tokens r, r + R, r + 2R,
// ... with R = cfg[kCfgAttentionRuns] runs (0: a token a tile). With one KV split, B = 64 has 512
// (token, KV head) pairs: as tasks they were four a worker a layer, each with its own hand-offs
// and merge task, where one task a worker suffices (bench/README.md). Strided, not adjacent, so
// that a tile's first token needs no load of R: its body starts while the word is on its way.
EVT_HD constexpr int64_t attention_run_stride(int32_t runs, int64_t tokens) { return runs > 0 ? runs : tokens; }

// Columns of the i64 `wtab` buffer (L x kWeightColumns): each layer's weight addresses, bf16. The
// projections are stored tiled (weight_tiles.h), Q, K and V stacked as one matrix of
// (HQ + 2 HKV) D rows and gate and up interleaved by 8 rows as one of 2 I rows; the norms are
// plain vectors.
//
// A sparse MoE layer has no gate/up and down matrices (null) but a router, stored tiled (experts
// rows), and its experts' matrices, each expert's stored as the dense ones are and the experts'
// one after another (moe_layout.h); a dense layer has those null.
enum WeightColumn : int {
  kWqkv = 0, kWo, kWgateUp, kWdown,
  kWinputNorm, kWpostNorm, kWqNorm, kWkNorm,  // q/k norms: null unless kCfgQkNorm
  kWrouter, kWexpertsGateUp, kWexpertsDown,   // sparse MoE layers only
  kWeightColumns = 16,                        // the buffer's width in the graph
};

template <typename T>
EVT_HD inline const T* weight(const DevBuffer& wtab, int64_t layer, WeightColumn column) {
  const int64_t address = wtab.as<const int64_t>()[layer * kWeightColumns + column];
  return reinterpret_cast<const T*>(static_cast<uintptr_t>(address));
}

// The cache slot of position `pos` of a sequence whose page list is `pages`. Positions and page
// sizes fit 32 bits, whose division is a few instructions on the GPU (a 64-bit one is a call).
EVT_HD constexpr int64_t kv_slot(const int32_t* pages, int64_t pos, int64_t page_size) {
  const auto p = static_cast<uint32_t>(pos), n = static_cast<uint32_t>(page_size);
  return static_cast<int64_t>(pages[p / n]) * page_size + p % n;
}

// [begin, end) of tile n when `total` items are cut into tiles of `per_tile`.
struct Range {
  int64_t begin, end;
};
EVT_HD constexpr Range tile_range(int64_t n, int64_t per_tile, int64_t total) {
  const int64_t b = n * per_tile;
  return Range{b < total ? b : total, b + per_tile < total ? b + per_tile : total};
}
// The 16-row weight groups a range of projection outputs covers (its begin a multiple of 16).
EVT_HD constexpr int64_t tile_groups(Range rows) { return (rows.end - rows.begin + 15) / 16; }

}  // namespace evt::kernels::llm
