#pragma once
// The weights the dense decode graph reads, one list for every backend: each per-layer weight
// with its `wtab` cell (kernels/llm/decode_config.h), and the global ones, with how each is
// stored. The projections are stored tiled (kernels/llm/weight_tiles.h): Q, K and V stacked as one
// matrix, gate and up interleaved as another, the LM head (also when it is tied to the
// embedding, which the gather reads plain). A sparse MoE layer has instead of gate/up and down
// its router (tiled) and its experts' matrices, stored as the dense ones are, one expert after
// another (kernels/llm/moe_layout.h). The CPU backend packs them into memory of its own; the
// CUDA backend packs or draws them straight into a device arena.

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "model/config.h"
#include "model/decode_plan.h"
#include "model/weights.h"

namespace evt::model {

enum class GlobalWeight { kNone, kEmbed, kFinalNorm, kLmHead };

// How each of a weight's matrices is stored.
enum class WeightLayout {
  kPlain,        // as the checkpoint stores it
  kTiled,        // the sources' rows stacked (q, k, v), tiled
  kTiledGateUp,  // gate and up rows interleaved by 8 in each 16-row group, tiled
};

struct DecodeWeight {
  std::string what;          // "layer 3 qkv_proj", for messages
  int64_t layer = -1;        // >= 0: wtab row of a per-layer weight
  kernels::llm::WeightColumn column = kernels::llm::kWqkv;  // its wtab column
  GlobalWeight global = GlobalWeight::kNone;                // or which global weight it is
  WeightLayout layout = WeightLayout::kPlain;
  int64_t rows = 0, cols = 0;  // one (fused) matrix; a vector is 1 x n
  int64_t count = 1;           // matrices stored one after another: a sparse layer's experts
  int64_t fan_in = 0;          // input features of a projection; 0 for a norm; -1 for the embedding
  int64_t panel_rows = 0;      // tiled: rows per row panel (its tiles' rows), 0 for one panel
  // The loaded tensors it is made of (in order: each matrix's parts, rows each), or empty without
  // host weights.
  std::vector<const Bf16Tensor*> host;

  int64_t wtab_index() const { return layer * kernels::llm::kWeightColumns + column; }
  // bf16 values of one matrix: the tiled layouts round it up to whole tiles.
  int64_t stored_one() const;
  // bf16 values stored, every matrix.
  int64_t stored() const { return count * stored_one(); }
  // Writes the stored values from `host` into `out` (stored() values).
  void pack(uint16_t* out) const;
};

// Every weight of `config` in checkpoint order: embedding, layer by layer, final norm, LM head.
// `host` may be null (random weights). The projections are stored in row panels of `tiling`'s
// tiles (weight_tiling()). Fails, naming the tensor, when a loaded tensor's size is not what the
// config needs.
Expected<std::vector<DecodeWeight>> decode_weights(const ModelConfig& config, const ModelWeights* host,
                                                   const Tiling& tiling);

}  // namespace evt::model
