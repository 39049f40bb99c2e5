#pragma once
// The LM head with the final RMSNorm fused in: tile n writes vocab rows [n * rows_v * rounds, ...)
// of logits = RMSNorm(x[L % 2][logit_rows[s]]) W^T for every sequence s, `rounds` row panels of
// rows_v rows one after another (gemv.h's rounds: a worker's share of the vocabulary in one task),
// and the greedy choice among them, its largest logit and that logit's index (sample.h's order: a
// NaN first, then the lowest index), as best[s][n] = (value, index). Sampling picks a greedy,
// unpenalized sequence's token from the tiles' choices rather than from the whole vocabulary.
//   reads (cfg, x: 2 x T x H bf16, final_w: H bf16, logit_rows: S i32, lm_w: the V x H matrix, tiled),
//   writes (logits: S x V f32, best: S x NV x 2 f32)

#include "kernels/llm/decode_config.h"
#include "kernels/llm/gemv.h"
#include "kernels/llm/sample.h"

namespace evt::kernels::llm {

// The vocabulary rows of tile n.
EVT_HD inline Range lm_head_rows(const int32_t* cfg, int64_t n, int64_t vocab) {
  return tile_range(n, int64_t{cfg[kCfgRowsV]} * cfg[kCfgLmRounds], vocab);
}

EVT_HD inline GemvTask lm_head_task(const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t tokens = reads[1].dim(1), hidden = reads[1].dim(2), vocab = writes[0].dim(1);
  float* out = writes[0].as<float>();
  const Range rows = lm_head_rows(cfg, tile[0], vocab);
  const int64_t panel = cfg[kCfgRowsV] / kTileRows, groups = tile_groups(rows);
  const GemvInput in{.x = reads[1].as<const uint16_t>() + (cfg[kCfgLayers] % 2) * tokens * hidden, .bf16 = true,
                     .ld = hidden, .tokens = reads[3].dim(0), .rows = reads[3].as<const int32_t>(),
                     .norm_w = reads[2].as<const uint16_t>(), .norm_len = hidden,
                     .eps = bits_to_f32(cfg[kCfgEpsBits])};
  GemvTask j = gemv_task(1, in, reads[4].as<const uint16_t>(), tiled_shape(vocab, hidden, cfg[kCfgRowsV]),
                         rows.begin / kTileRows, min_of(panel, groups), 0, hidden, vocab,
                         GemvOutput{.out = out, .ld = vocab});
  j.rounds = (groups + panel - 1) / panel;
  return j;
}

template <class Block>
EVT_HD void lm_head_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  gemv_run(b, lm_head_task(tile, reads, writes));
  b.sync();  // the block's logits are in memory. Each sequence's best of them.
  const int64_t seqs = writes[0].dim(0), vocab = writes[0].dim(1), tiles = writes[1].dim(1);
  const Range rows = lm_head_rows(reads[0].as<const int32_t>(), tile[0], vocab);
  for (int64_t s = 0; s < seqs; ++s) {
    const float* logits = writes[0].as<const float>() + s * vocab;
    Candidate c{-INFINITY, vocab};
    for (int64_t r = rows.begin + b.thread(); r < rows.end; r += b.threads()) {
      if (better(logits[r], r, c.value, c.index)) c = Candidate{logits[r], r};
    }
    c = block_best(b, c);
    if (b.thread() == 0) {
      float* best = writes[1].as<float>() + (s * tiles + tile[0]) * 2;
      best[0] = c.value;
      best[1] = static_cast<float>(c.index);  // exact: vocabularies are far below 2^24
    }
  }
}

template <class Block>
EVT_HD WeightStream lm_head_stream(const Block& b, const int64_t* tile, const DevBuffer* reads,
                                   const DevBuffer* writes) {
  return gemv_stream(b, lm_head_task(tile, reads, writes));
}

}  // namespace evt::kernels::llm
