#pragma once
// What one step of the dense decode graph (graphs/dense_decode.evt.in) needs besides data: the
// tokens of the step and where they sit, the graph's dims, and the run-time scalars in `cfg`
// (tile sizes among them). Pure functions of the model, the batch and the tiling, shared by
// every backend.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/llm/decode_config.h"
#include "model/config.h"
#include "util/status.h"

namespace evt::model {

// One step: T tokens from S sequences. Sequence s's pages are row s of block_table; token t
// belongs to sequence token_seq[t], sits at position positions[t] and attends to positions
// 0..positions[t] of its sequence (its own K/V included, written in this step). Sequence s
// returns the logits of token logit_rows[s] and the token the graph's sample task draws from
// them (kernels/llm/sample.h): with sample_words row s (kSampleWords words; empty: greedy for
// every sequence), and penalties on the (token, count) pairs
// penalties[2 * penalty_start[s] .. 2 * penalty_start[s + 1]) (empty: none).
struct StepBatch {
  std::vector<int32_t> ids, positions, token_seq;  // per token
  std::vector<int32_t> logit_rows;                 // per sequence
  std::vector<int32_t> block_table;                // S x pages_per_seq
  int64_t pages_per_seq = 0;
  std::vector<int32_t> sample_words;               // S x kSampleWords, or empty
  std::vector<int32_t> penalty_start, penalties;   // S + 1 and P x 2, or both empty

  int64_t tokens() const { return static_cast<int64_t>(ids.size()); }
  // Positions the longest-reaching token attends to (at least 1).
  int64_t longest_context() const {
    int64_t longest = 1;
    for (int32_t p : positions) longest = p + 1 > longest ? p + 1 : longest;
    return longest;
  }
  int64_t sequences() const { return static_cast<int64_t>(logit_rows.size()); }
};

// Tile sizes: output rows per tile of each projection, K and KV splits. default_tiling() fills a
// grid of `workers` SMs or threads. The projections' weights are stored in row panels of their
// tiles (kernels/llm/weight_tiles.h), so rows_h, rows_i, rows_v and rows_e are fixed when the
// weights are placed: weight_tiling(), which default_tiling() starts from for every batch.
struct Tiling {
  int64_t rows_h = 16;     // embedding, o_proj, down
  int64_t rows_i = 32;     // gate/up
  int64_t rows_v = 256;    // lm_head: rows per round (a row panel of its weights)
  int64_t lm_rounds = 1;   // lm_head: rounds per tile
  int64_t qkv_splits = 1;  // KQ
  int64_t kv_split_len = 256;
  int64_t rows_e = 16;     // MoE router (moe_graph.h)
  int64_t rows_xi = 8;     // MoE expert gate/up of a sparse layer: rows of an expert's width
  int64_t rows_dn = 16;    // MoE expert down of a sparse layer: rows of H
  int64_t workers = 1;     // the SMs or threads the tiles are cut for (qkv_finish's pairs)
  // Sets of 16 tokens a projection's pass takes in a step of more than 16 tokens
  // (kernels/llm/gemv.h): kWidePassSets where such steps run the megakernel's entry of wide passes
  // (the CUDA decoder's static schedule), which the step's scratch is then planned for.
  int pass_sets = 1;
};
Tiling weight_tiling(const ModelConfig& config, int workers);
// The pass sets a backend of wide passes gives `config`'s steps of more than 16 tokens (Tiling's
// pass_sets) on `workers` SMs: kWidePassSets for a dense model whose layers give each worker at
// least 800 KiB of weights to stream, else 1.
int wide_pass_sets(const ModelConfig& config, int64_t workers);
Tiling default_tiling(const ModelConfig& config, int64_t tokens, int64_t longest_context, int workers);

// The KV cache's geometry: `pages` pages of `page_size` positions, per layer.
struct KvGeometry {
  int64_t page_size = 16;
  int64_t pages = 0;
  int64_t slots() const { return page_size * pages; }
};

struct StepPlan {
  std::map<std::string, int64_t> dims;  // by the graph's dim names
  std::array<int32_t, kernels::llm::kCfgWords> cfg{};
  // GPU: the scratch the step's bodies use per block (at most kDecodeScratchBytes). Asking for no
  // more leaves the rest of the SM's shared memory to the weight ring (up to its limit) and L1
  // cache: at B = 1 on Qwen3-8B a step measured 9.6 ms with 200 KiB of scratch and 9.0 ms with
  // 96 KiB (H200, before the ring).
  int64_t scratch_bytes = 0;
  // GPU: the most stages the weight ring takes in what the scratch leaves (step_ring_stages).
  int ring_stages = 0;

  // Binds KVS, attention's KV splits, and its runs of tokens (TA and cfg's kCfgAttentionRuns,
  // kernels/llm/decode_config.h): a token a run when a merge combines the splits, else runs that
  // make about one (run, KV head) task a worker. Needs T and HKV bound.
  void set_kv_splits(int64_t splits, int64_t workers);
};

// Checks the batch against the model and the cache (ids in the vocab, pages in the pool,
// positions within the block table) and names what is wrong.
Expected<StepPlan> plan_step(const ModelConfig& config, const Tiling& tiling, const KvGeometry& kv,
                             const StepBatch& batch);

// The sample task's inputs as the graph binds them: the batch's, or the greedy, unpenalized
// defaults its empty fields stand for (the graph's pen buffer has at least one entry).
struct SampleInputs {
  std::vector<int32_t> words, penalty_start, penalties;
};
SampleInputs sample_inputs(const StepBatch& batch);

// The head dims the shipped binary has a compiled decode graph for.
bool decode_head_dim_supported(int64_t head_dim);

// The model checks of the decode graph's bodies: a compiled head dim, at most
// kernels::llm::kMaxGroup query heads per KV head, and sizes that are multiples of 8 (16-byte
// weight loads).
Status check_decodable(const ModelConfig& config);

}  // namespace evt::model
