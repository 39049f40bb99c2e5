#pragma once
// Greedy sampling: tile s writes the index of row s's largest logit; ties go to the lowest
// index and a NaN counts as the largest value, as torch.argmax does. This is the sample row's
// greedy path (block_argmax in sample.h).
//   reads (logits: S x V f32), writes (next: S i32)

#include "kernels/llm/sample.h"

namespace evt::kernels::llm {

template <class Block>
EVT_HD void argmax_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t s = tile[0], vocab = reads[0].dim(1);
  const int64_t best = block_argmax(b, reads[0].as<const float>() + s * vocab, vocab);
  if (b.thread() == 0) writes[0].as<int32_t>()[s] = static_cast<int32_t>(best);
}

}  // namespace evt::kernels::llm
