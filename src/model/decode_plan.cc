#include "model/decode_plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/llm/attention_merge.h"
#include "kernels/llm/decode_attention.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/moe_layout.h"
#include "kernels/llm/moe_plan.h"
#include "kernels/llm/sample.h"
#include "model/moe_graph.h"
#include "runtime/megakernel/shared_memory.h"
#include "util/int_math.h"

namespace evt::model {

static_assert(kernels::llm::kHostWarps * 32 == kernels::llm::kDecodeThreads,
              "the CPU's GEMV plays as many warps as the GPU's decode block has");

// The most weight groups a projection tile may own: what its warps keep in registers (gemv.h).
constexpr int64_t kMaxTileGroups = kernels::llm::kMaxGroupsPerWarp * (kernels::llm::kDecodeThreads / 32);
// A projection input of any width fits the scratch: it is staged a segment of k-blocks at a time.
static_assert(kernels::llm::gemv_min_scratch(kMaxTileGroups, kernels::llm::kDecodeThreads / 32,
                                             kernels::llm::kWidePassSets) <= mk::scratch_leaving_stages(3),
              "the largest projection tile's sums of a wide pass and one staged k-block fit the scratch that "
              "leaves the weight ring three stages");

bool decode_head_dim_supported(int64_t head_dim) { return head_dim == 64 || head_dim == 128; }

Status check_decodable(const ModelConfig& c) {
  if (!decode_head_dim_supported(c.head_dim)) {
    return error("head_dim {} has no compiled decode graph (supported: 64, 128)", c.head_dim);
  }
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      c.num_heads / c.num_kv_heads > kernels::llm::kMaxGroup) {
    return error("{} query heads over {} KV heads: the decode kernels take a whole group of at most {}", c.num_heads,
                 c.num_kv_heads, kernels::llm::kMaxGroup);
  }
  if (c.hidden_size % 8 != 0 || c.intermediate_size % 8 != 0) {
    return error("hidden_size {} and intermediate_size {} must be multiples of 8", c.hidden_size,
                 c.intermediate_size);
  }
  if (c.moe && c.moe->moe_intermediate_size % 8 != 0) {
    return error("moe_intermediate_size {} must be a multiple of 8", c.moe->moe_intermediate_size);
  }
  if (c.moe && c.moe->num_experts > kernels::llm::kMaxMoeExperts) {
    return error("{} experts per layer: the MoE tile functions take at most {}", c.moe->num_experts,
                 kernels::llm::kMaxMoeExperts);
  }
  if (c.moe && c.moe->num_experts_per_tok > kernels::llm::kMaxMoeTopK) {
    return error("{} experts per token: the MoE tile functions take at most {}", c.moe->num_experts_per_tok,
                 kernels::llm::kMaxMoeTopK);
  }
  return Status();
}

namespace {

// Rows per tile when `rows` outputs are cut into tiles for `workers`: whole weight groups of
// `group` outputs (16, or 8 for gate/up, whose groups hold both; gemv.h), as few tiles as keep
// the busiest worker's share the least it can be. A tile's warps share its work evenly whatever
// its size, so one tile per worker is best (each tile stages its input once), unless its groups
// would not fit the warps' registers (kMaxTileGroups): then as few rounds of tiles as do.
int64_t tile_rounds(int64_t rows, int64_t group, int workers) {
  return ceil_div(ceil_div(ceil_div(rows, group), std::max(workers, 1)), kMaxTileGroups);
}
int64_t rows_per_tile(int64_t rows, int64_t group, int workers) {
  return group * ceil_div(ceil_div(rows, group), std::max(workers, 1) * tile_rounds(rows, group, workers));
}

// The distinct experts a step's tokens x top_k picks are expected to hit, were each pick uniform
// over the experts: a random router's (`eventide bench moe` counted 52.2 of 128 at 8 tokens x 8,
// where this gives 50.3). A trained router's picks overlap more, so it hits fewer.
double expected_experts(int64_t experts, int64_t picks) {
  const auto x = static_cast<double>(std::max<int64_t>(experts, 1));
  return x * (1.0 - std::pow(1.0 - 1.0 / x, static_cast<double>(picks)));
}

// Rows per tile of a routed expert's matrix (`rows` outputs in groups of `group`), whose tiles
// share the workers with every other routed expert's. rows_per_tile's tiling for `per_expert`
// workers an expert gives each expert as many tiles as the rounds its groups take of the warps'
// registers times per_expert: that fills the workers when as many experts as the step has picks
// are routed. Fewer usually are, and then a tile fewer an expert can save a whole round of the
// workers. So of the counts from the fewest the registers allow to that one, the tiling takes the
// one whose tiles for the expected experts take the least time a worker (its rounds of tiles
// times a tile's groups), the fewest on a tie. On an H200 (7c29596, Qwen3-30B-A3B, ctx 512) the
// steps at B = 4 / 8 / 16 / 32 with gate/up tiles of 5 to 12 an expert: 5 was 4.8% faster at B =
// 8 than the 6 of rows_per_tile (302 expected tiles, three rounds, against 252, two); at B = 4
// every other count was slower than its 8 (up to 6.5%), and at B = 16 and 32 none was faster than
// its 5. Down tiles of 7 to 16 were never faster than its 6 (B >= 8) and 8 (B = 4); this picks
// those.
int64_t expert_rows_per_tile(int64_t rows, int64_t group, int per_expert, double experts, int workers) {
  const int64_t groups = ceil_div(rows, group);
  const int64_t most_tiles = ceil_div(groups, ceil_div(rows_per_tile(rows, group, per_expert), group));
  int64_t best = most_tiles;
  double best_time = std::numeric_limits<double>::max();
  for (int64_t tiles = ceil_div(groups, kMaxTileGroups); tiles <= most_tiles; ++tiles) {
    const int64_t per_tile = ceil_div(groups, tiles), real = ceil_div(groups, per_tile);
    const double time = std::ceil(experts * static_cast<double>(real) / workers) * static_cast<double>(per_tile);
    if (time < best_time) best = real, best_time = time;
  }
  return group * ceil_div(groups, best);
}

// K splits of the QKV projection, whose tiles are whole heads: the most that keep heads x splits
// tiles within one round of the workers (at most `most`). A tile's latency (staging its input,
// the first loads) weighs more than an idle worker's share, so a second round costs more than
// it fills.
int64_t qkv_splits(int64_t heads, int64_t most, int workers) {
  return std::clamp<int64_t>(workers / heads, 1, most);
}

// Decode attention's cost in rounds: a block's warps take kAttentionStepPositions positions each
// per round (one memory round trip and a few hundred tensor-core instructions, ~1-2 us on an H200),
// and a task costs about kSplitFixedRounds more (its wait, the split's q fragments, the warps'
// merge: ~10 us). Splits past a round each also add a partial state for the merge to combine.
constexpr int64_t kSplitFixedRounds = 6;
// With more than one split the merge tasks combine the partial states, about a round more; with one,
// attention writes its output itself and the merge does nothing (attention_merge.h).
constexpr int64_t kMergeRounds = 1;

// KV splits of attention over `heads` (token, KV head) pairs: the count that ends the attention
// soonest, each wave of tasks (one per worker) taking its longest split's rounds plus a task's
// fixed cost, and then the merge's round when there are splits to merge. Without the merge's
// round 2 splits beat 1 at B = 6-8 (ctx 512, 8 KV heads) by a round, and 1 was faster: with it, on
// an H200 B = 8 took 3.7% less on 0.6B, 3.3% on 1.7B, 1.3% on 8B, and 30B-A3B at B = 16 0.7%
// (bench/results/tune_h200_97c9c4d.json, kv_merge_round_ab_h200.json).
// On a tie, the count whose tasks are nearest half the workers among those the merge loads at
// once (kMergeSplitsAtOnce), and of two as near the fewer (each split is another partial for the
// merge). The rounds cannot tell apart the counts of one round in one wave: on
// an H200 (against 9c0efa5, ctx 512) this took B = 1 from 3 splits to 8 (64 tasks), 0.6B 1.6% and
// 1.7B 1.1% faster, and B = 2 from 3 to 4 (-0.7% / -0.2%); uncapped, 30B-A3B's 4 KV heads took 16
// splits at B = 1 and were 1.1% slower (bench/results/kv_split_tiebreak_ab_h200.json).
// Measured with `eventide tune` on an H200 at ff64294 (B = 1): Qwen3-0.6B at 513 positions ran
// 2.368 / 2.303 / 2.259 / 2.287 / 2.321 ms with 1 / 2 / 4 / 8 / 16 splits, and past one wave
// (Qwen3-8B, 4097 positions, 32 splits of 8 KV heads) 7.94 ms against 7.17 with 16.
int64_t kv_splits(int64_t heads, int64_t longest_context, int workers) {
  const int64_t round = kernels::llm::kAttentionStepPositions * (kernels::llm::kDecodeThreads / 32);
  const auto off_half = [&](int64_t splits) { return std::abs(heads * splits - workers / 2); };
  int64_t best = 1, best_cost = std::numeric_limits<int64_t>::max();
  for (int64_t s = 1; s <= std::max<int64_t>(1, longest_context / kernels::llm::kAttentionStepPositions); ++s) {
    const int64_t cost = ceil_div(heads * s, workers) * (ceil_div(ceil_div(longest_context, s), round) + kSplitFixedRounds) +
                         (s > 1 ? kMergeRounds : 0);
    const bool nearer = s <= kernels::llm::kMergeSplitsAtOnce && off_half(s) < off_half(best);
    if (cost < best_cost || (cost == best_cost && nearer)) best = s, best_cost = cost;
  }
  return best;
}

// A projection tile's shape as its scratch sees it: columns, row groups and tokens (gemv.h).
struct GemvShape {
  int64_t k, groups, tokens;
  bool normed = false;  // an f32 input the tile norms while it stages it (gemv.h's stage_pass)
};

// The scratch a step asks for, at least `least` (what its bodies cannot run in less). The shared
// memory it leaves goes to the weight ring, in whole 32 KiB stages, and the rest to the L1 (which
// holds the threads' stacks and spills). Staging every projection input whole, a step of B >= 16
// on the wider models would take all the scratch a block allows and leave the ring two stages
// (64 KiB a block in flight), with which the passes stream slower. So the scratch is the least in
// which every projection input takes as few segments (restagings that stop the pass: gemv.h) as
// in the most that leaves three stages; and that most when a normed input takes more than one.
// Such an input's first segment is staged on the way of the norm's read of the whole row, and
// each later one reads its floats again, an L2 round trip per octet and thread (stage_segment),
// so the first is kept as wide as it can be: traced, Qwen3-8B's gate/up at B = 16 restaged its
// second segment of 44 k-blocks in 6.2 us.
//
// On an H200 (f88b589, ctx 512), against all the scratch a block allows: three stages made
// Qwen3-8B's steps at B = 16 / 32 / 64 3.4 / 4.0 / 4.4% shorter (with 127 KiB; 2.9 / 3.7 / 4.6% with
// 109, where its gate/up input's segments are 84 and 44 k-blocks rather than 100 and 28) and
// Qwen3-1.7B's 6.5 / 7.7 / 8.3% (109 KiB; 6.0 / 7.0 / 8.0% with 127); Qwen3-30B-A3B's at B = 16
// 5.8% shorter with 97 KiB, in which its inputs take as many segments as in 127 (4.8%); and 97
// KiB made Qwen3-0.6B's 4.8% longer at B = 16, its down input then staged in two segments, not one.
// `sets`: of 16 tokens, what a pass takes (gemv.h).
int64_t step_scratch(int64_t least, const std::vector<GemvShape>& gemvs, int warps, int sets) {
  namespace llm = kernels::llm;
  const int64_t most = std::min<int64_t>(llm::kDecodeScratchBytes, mk::scratch_leaving_stages(3));
  int64_t scratch = least;
  for (const GemvShape& g : gemvs) {
    const int64_t kblocks = ceil_div(g.k, llm::kTileCols);
    const int64_t segments = llm::gemv_segments(g.k, g.groups, g.tokens, warps, most, sets);
    if (g.normed && segments > 1) {
      scratch = std::max(scratch, most);
    } else {
      const int64_t per_segment = ceil_div(kblocks, segments);
      scratch =
          std::max(scratch, llm::gemv_scratch_bytes(per_segment * llm::kTileCols, g.groups, g.tokens, warps, sets));
    }
  }
  return round_up(scratch, 1024);
}

// The bytes of a layer's attention and dense MLP weights (bf16) that each of `workers` streams.
int64_t layer_share(const ModelConfig& c, int64_t workers) {
  int64_t layer = c.hidden_size * (c.q_size() + 2 * c.kv_size()) + c.q_size() * c.hidden_size;
  if (c.has_dense_layers()) layer += 3 * c.hidden_size * c.intermediate_size;  // gate, up, down
  return layer * 2 / std::max<int64_t>(workers, 1);
}

// The most stages a step's weight ring takes (the launch gives it what the scratch leaves, up to
// this): kDefaultRingStages, or one more when a layer's attention and dense MLP weights give each
// worker at least 512 KiB to stream. On an H200 (e59b255, ctx 512, alternated three times) five
// stages against four made Qwen3-8B's steps (2.8 MiB a worker) 2.0% shorter at B = 1, at ctx 4096
// too, and 1.7B's (745 KiB) 2.2 / 1.5% at B = 1 / 4; but 0.6B's (233 KiB) 2.1% longer at B = 4
// and 1.7% at B = 1 and ctx 4096, and 30B-A3B's (its attention's 279 KiB) 0.7% at B = 1. When a
// worker's share of a stage is a few ring stages, four already run ahead through most of it, and
// one more adds 32 KiB in flight on every SM to the queues the bodies' own loads wait in
// (launch_knobs.cc). At B = 16 every model was within 0.4% either way.
int step_ring_stages(const ModelConfig& c, int64_t workers) {
  constexpr int64_t kDeepRingShare = 512 * 1024;
  return layer_share(c, workers) >= kDeepRingShare ? mk::kDefaultRingStages + 1 : mk::kDefaultRingStages;
}

// Sampling inputs of the right sizes, each sequence's penalized tokens in the vocab and
// distinct, with positive counts.
Status check_sampling(const StepBatch& b, int64_t vocab) {
  const int64_t seqs = b.sequences();
  if (!b.sample_words.empty() && static_cast<int64_t>(b.sample_words.size()) != seqs * kernels::llm::kSampleWords) {
    return error("step: {} sampling words for {} sequences (expected {} each)", b.sample_words.size(), seqs,
                 static_cast<int>(kernels::llm::kSampleWords));
  }
  if (b.penalty_start.empty() && b.penalties.empty()) return Status();
  if (static_cast<int64_t>(b.penalty_start.size()) != seqs + 1 || b.penalty_start[0] != 0 ||
      b.penalty_start.back() * 2 != static_cast<int64_t>(b.penalties.size())) {
    return error("step: penalty_start ({} entries) does not index the {} penalty pairs of {} sequences",
                 b.penalty_start.size(), b.penalties.size() / 2, seqs);
  }
  for (int64_t s = 0; s < seqs; ++s) {
    std::vector<int32_t> tokens;
    if (b.penalty_start[s + 1] < b.penalty_start[s]) return error("step: penalty_start decreases at sequence {}", s);
    for (int32_t e = b.penalty_start[s]; e < b.penalty_start[s + 1]; ++e) {
      const int32_t token = b.penalties[2 * e], count = b.penalties[2 * e + 1];
      if (token < 0 || token >= vocab || count < 1) {
        return error("step: sequence {} penalizes token {} x {} (needs a token in the vocab of {}, a count >= 1)",
                     s, token, count, vocab);
      }
      tokens.push_back(token);
    }
    std::sort(tokens.begin(), tokens.end());
    if (std::adjacent_find(tokens.begin(), tokens.end()) != tokens.end()) {
      return error("step: sequence {} lists a penalized token twice", s);
    }
  }
  return Status();
}

// A decode step: no sequence has two tokens in it, so no token attends to a key another token of
// the step appends, and each token's attention may finish its own q, k and v (the graph's
// qkv_finish tiles are then bound to none).
bool one_token_per_sequence(const StepBatch& b) {
  std::vector<bool> seen(static_cast<size_t>(b.sequences()), false);
  for (int32_t s : b.token_seq) {
    if (seen[static_cast<size_t>(s)]) return false;
    seen[static_cast<size_t>(s)] = true;
  }
  return true;
}

}  // namespace

SampleInputs sample_inputs(const StepBatch& b) {
  const size_t seqs = static_cast<size_t>(b.sequences());
  SampleInputs in{b.sample_words, b.penalty_start, b.penalties};
  if (in.words.empty()) in.words.assign(seqs * kernels::llm::kSampleWords, 0);
  if (in.penalty_start.empty()) in.penalty_start.assign(seqs + 1, 0);
  if (in.penalties.empty()) in.penalties = {0, 1};  // past every sequence's range: applies to none
  return in;
}

Tiling weight_tiling(const ModelConfig& c, int workers) {
  namespace llm = kernels::llm;
  workers = std::max(workers, 1);
  Tiling t;
  t.workers = workers;
  t.rows_h = rows_per_tile(c.hidden_size, llm::kTileRows, workers);
  t.rows_i = rows_per_tile(c.intermediate_size, 8, workers);  // gate and up rows share a group
  // The LM head runs its rounds in one task (gemv.h's rounds), so it gets one tile a worker of
  // lm_rounds panels of rows_v rows.
  t.rows_v = rows_per_tile(c.vocab_size, llm::kTileRows, workers);
  t.lm_rounds = tile_rounds(c.vocab_size, llm::kTileRows, workers);
  if (c.moe) t.rows_e = rows_per_tile(std::max<int64_t>(1, c.moe->num_experts), llm::kTileRows, workers);
  return t;
}

// Whether a dense model's steps of more than 16 tokens take wide passes depends on how much each
// worker streams a layer: the passes stream the weights once a pass, so wide ones stream them up
// to kWidePassSets times less, but ptxas spills across their entry (its sums take registers the
// rest of the megakernel needs), which slows every body. Measured on an H200, the megakernel's
// entry of wide passes against passes of 16, ctx 512 (bench/results/wide_pass_share_h200_0bfeb2c.json,
// two rounds alternated; bench/results/wide_passes_ab_h200.json for 8B), by a layer's share a worker
// of 132:
//  - Qwen3-8B (2.8 MiB): 12-25% faster at B = 17-64;
//  - Qwen3-4B (1.5 MiB): 10-17% faster at B = 24-128;
//  - Llama-3.2-1B (900 KiB): 4-11% faster at B = 24 and 48-128, 0.6% slower at 32;
//  - Qwen3-1.7B (745 KiB): 8.0 / 5.7% slower at B = 32 / 48, 1-2% at 24 and 96, 2-5% faster at
//    64, 128 and 256;
//  - Qwen3-0.6B (233 KiB): 6-17% slower at B = 32-256.
// An MoE model's experts are tiled by the tokens routed to them, few a pass in a decode step:
// Qwen3-30B-A3B's steps were 15-22% slower at B = 32-128, and its MoE block at 1024 tokens only 3%
// faster.
int wide_pass_sets(const ModelConfig& c, int64_t workers) {
  constexpr int64_t kWideShare = 800 * 1024;
  return !c.has_moe_layers() && layer_share(c, workers) >= kWideShare ? kernels::llm::kWidePassSets : 1;
}

Tiling default_tiling(const ModelConfig& c, int64_t tokens, int64_t longest_context, int workers) {
  namespace llm = kernels::llm;
  workers = std::max(workers, 1);
  Tiling t = weight_tiling(c, workers);
  t.qkv_splits = qkv_splits(c.num_heads + 2 * c.num_kv_heads, std::max<int64_t>(1, c.hidden_size / 256), workers);
  t.kv_split_len = std::max<int64_t>(1, ceil_div(longest_context, kv_splits(tokens * c.num_kv_heads, longest_context,
                                                                            workers)));
  if (c.moe) {
    // The experts a step can route to share the workers: at B = 1 on Qwen3-30B-A3B 8 experts get
    // 16 tiles each. (Tiled for the whole grid per expert, B = 1 took 1024 down tiles of 24 KB a
    // layer, 8 us each: 3 ms of a 22 ms step.) A dense layer is tiled as the dense MLP (rows_i, rows_h).
    const int64_t experts = std::max<int64_t>(1, c.moe->num_experts);
    const int64_t routed = std::min(experts, tokens * c.moe->num_experts_per_tok);
    const int per_expert = static_cast<int>(std::max<int64_t>(1, workers / routed));
    const double expected = expected_experts(experts, tokens * c.moe->num_experts_per_tok);
    t.rows_xi = expert_rows_per_tile(c.moe->moe_intermediate_size, 8, per_expert, expected, workers);
    t.rows_dn = expert_rows_per_tile(c.hidden_size, llm::kTileRows, per_expert, expected, workers);
  }
  return t;
}

void StepPlan::set_kv_splits(int64_t splits, int64_t workers) {
  const int64_t tokens = dims.at("T"), kv_heads = dims.at("HKV");
  const int64_t per_run = splits > 1 ? 1 : ceil_div(tokens * kv_heads, std::max<int64_t>(workers, 1));
  const int64_t runs = ceil_div(tokens, per_run);
  dims["KVS"] = splits;
  dims["TA"] = runs;
  cfg[kernels::llm::kCfgAttentionRuns] = static_cast<int32_t>(runs);
}

Expected<StepPlan> plan_step(const ModelConfig& c, const Tiling& tiling, const KvGeometry& kv, const StepBatch& batch) {
  namespace llm = kernels::llm;
  const int64_t tokens = batch.tokens(), seqs = batch.sequences();
  if (tokens == 0 || seqs == 0) return error("a step needs at least one token and one sequence");
  if (static_cast<int64_t>(batch.positions.size()) != tokens || static_cast<int64_t>(batch.token_seq.size()) != tokens) {
    return error("step: {} token ids but {} positions and {} sequence indices", tokens, batch.positions.size(),
                 batch.token_seq.size());
  }
  if (static_cast<int64_t>(batch.block_table.size()) != seqs * batch.pages_per_seq || batch.pages_per_seq <= 0) {
    return error("step: the block table holds {} entries, expected {} sequences x {} pages", batch.block_table.size(),
                 seqs, batch.pages_per_seq);
  }
  for (int64_t t = 0; t < tokens; ++t) {
    if (batch.ids[t] < 0 || batch.ids[t] >= c.vocab_size) {
      return error("step: token {} has id {}, outside the vocab of {}", t, batch.ids[t], c.vocab_size);
    }
    if (batch.token_seq[t] < 0 || batch.token_seq[t] >= seqs) {
      return error("step: token {} belongs to sequence {}, but the step has {}", t, batch.token_seq[t], seqs);
    }
    if (batch.positions[t] < 0 || batch.positions[t] >= batch.pages_per_seq * kv.page_size) {
      return error("step: token {} sits at position {}, beyond the {} pages of its block table row", t,
                   batch.positions[t], batch.pages_per_seq);
    }
  }
  for (int64_t s = 0; s < seqs; ++s) {
    if (batch.logit_rows[s] < 0 || batch.logit_rows[s] >= tokens) {
      return error("step: sequence {} reads the logits of token {}, but the step has {}", s, batch.logit_rows[s], tokens);
    }
  }
  for (int32_t page : batch.block_table) {
    if (page < 0 || page >= kv.pages) return error("step: page {} is outside the cache's {} pages", page, kv.pages);
  }
  EVT_RETURN_IF_ERROR(check_sampling(batch, c.vocab_size));

  const int64_t qkv_split_len = round_up(ceil_div(c.hidden_size, tiling.qkv_splits), kernels::llm::kTileCols);
  const bool finishes = one_token_per_sequence(batch);
  // qkv_finish's (head, token) pairs, spread evenly over one round of tiles on the workers.
  const int64_t finish_pairs = (c.num_heads + 2 * c.num_kv_heads) * tokens;
  const int64_t finish_per_tile = ceil_div(finish_pairs, std::max<int64_t>(tiling.workers, 1));
  StepPlan plan;
  plan.dims = {
      {"T", tokens},
      {"S", seqs},
      {"L", c.num_layers},
      {"H", c.hidden_size},
      {"I", c.intermediate_size},
      {"HQ", c.num_heads},
      {"HKV", c.num_kv_heads},
      {"V", c.vocab_size},
      {"NH", ceil_div(c.hidden_size, tiling.rows_h)},
      {"NI", ceil_div(c.intermediate_size, tiling.rows_i)},
      {"NV", ceil_div(c.vocab_size, tiling.rows_v * tiling.lm_rounds)},
      {"KQ", ceil_div(c.hidden_size, qkv_split_len)},
      {"SLOTS", kv.slots()},
      {"MAXB", batch.pages_per_seq},
      {"NQF", finishes ? 0 : ceil_div(finish_pairs, finish_per_tile)},
      {"P", std::max<int64_t>(1, static_cast<int64_t>(batch.penalties.size() / 2))},
      {"LMW", llm::tiled_shape(c.vocab_size, c.hidden_size).bytes() / 2},
  };
  plan.set_kv_splits(ceil_div(batch.longest_context(), tiling.kv_split_len), tiling.workers);
  // The scratch the bodies cannot run in less: attention's, the merge's, the MoE plan's, and each
  // projection tile's sums with one staged k-block.
  const int warps = llm::kDecodeThreads / 32;
  int64_t least = std::max(llm::attention_scratch_bytes(c.head_dim, warps),
                           llm::attention_merge_scratch_bytes(plan.dims["KVS"]));
  std::vector<GemvShape> gemvs{
      {qkv_split_len, c.head_dim / llm::kTileRows, tokens, true},
      {c.q_size(), tiling.rows_h / llm::kTileRows, tokens},
      {c.hidden_size, tiling.rows_v / llm::kTileRows, seqs, true},
  };
  if (c.has_dense_layers()) {  // gate/up and down (in a MoE model, a dense layer's expert tiles)
    gemvs.push_back({c.hidden_size, tiling.rows_i / 8, tokens, true});
    gemvs.push_back({c.intermediate_size, tiling.rows_h / llm::kTileRows, tokens});
  }
  if (c.has_moe_layers()) {  // router, an expert's gate/up and down (an expert may get every token), plan
    gemvs.push_back({c.hidden_size, tiling.rows_e / llm::kTileRows, tokens, true});
    gemvs.push_back({c.hidden_size, tiling.rows_xi / 8, tokens, true});
    gemvs.push_back({c.moe->moe_intermediate_size, tiling.rows_dn / llm::kTileRows, tokens});
    least = std::max(least, llm::moe_plan_scratch_bytes(c.moe->num_experts, c.moe->num_experts_per_tok, warps));
  }
  const int sets = tokens > llm::kPassTokens ? tiling.pass_sets : 1;
  for (const GemvShape& g : gemvs) least = std::max(least, llm::gemv_min_scratch(g.groups, warps, sets));
  plan.scratch_bytes = step_scratch(least, gemvs, warps, sets);
  plan.ring_stages = step_ring_stages(c, tiling.workers);
  auto& cfg = plan.cfg;
  cfg[llm::kCfgLayers] = static_cast<int32_t>(c.num_layers);
  cfg[llm::kCfgEpsBits] = std::bit_cast<int32_t>(static_cast<float>(c.rms_norm_eps));
  cfg[llm::kCfgQkNorm] = c.qk_norm ? 1 : 0;
  cfg[llm::kCfgPageSize] = static_cast<int32_t>(kv.page_size);
  cfg[llm::kCfgKvSplitLen] = static_cast<int32_t>(tiling.kv_split_len);
  cfg[llm::kCfgQkvSplitLen] = static_cast<int32_t>(qkv_split_len);
  cfg[llm::kCfgRowsH] = static_cast<int32_t>(tiling.rows_h);
  cfg[llm::kCfgRowsI] = static_cast<int32_t>(tiling.rows_i);
  cfg[llm::kCfgRowsV] = static_cast<int32_t>(tiling.rows_v);
  cfg[llm::kCfgLmRounds] = static_cast<int32_t>(tiling.lm_rounds);
  cfg[llm::kCfgHeads] = static_cast<int32_t>(c.num_heads);
  cfg[llm::kCfgKvHeads] = static_cast<int32_t>(c.num_kv_heads);
  cfg[llm::kCfgHeadDim] = static_cast<int32_t>(c.head_dim);
  cfg[llm::kCfgAttentionFinishes] = finishes ? 1 : 0;
  cfg[llm::kCfgFinishPairs] = static_cast<int32_t>(finish_per_tile);
  if (const auto& m = c.moe; m && c.has_moe_layers()) {
    bind_moe_dims(c, tiling, tokens, plan.dims);
    cfg[llm::kCfgMoeRowsE] = static_cast<int32_t>(tiling.rows_e);
    cfg[llm::kCfgMoeRowsXI] = static_cast<int32_t>(tiling.rows_xi);
    cfg[llm::kCfgMoeRowsDn] = static_cast<int32_t>(tiling.rows_dn);
    cfg[llm::kCfgMoeDenseInter] = static_cast<int32_t>(c.intermediate_size);
    cfg[llm::kCfgMoeNormTopk] = m->norm_topk_prob ? 1 : 0;
    cfg[llm::kCfgMoeInter] = static_cast<int32_t>(m->moe_intermediate_size);
    cfg[llm::kCfgMoeTopK] = static_cast<int32_t>(m->num_experts_per_tok);
    cfg[llm::kCfgMoeExperts] = static_cast<int32_t>(m->num_experts);
  }
  return plan;
}

}  // namespace evt::model
