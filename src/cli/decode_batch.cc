#include "cli/decode_batch.h"

namespace evt::cli {

model::StepBatch decode_batch(const model::ModelConfig& c, int64_t batch, int64_t ctx, int64_t page_size,
                              std::mt19937& rng) {
  model::StepBatch b;
  const int64_t pages = ctx / page_size + 1;
  b.pages_per_seq = pages;
  for (int64_t s = 0; s < batch; ++s) {
    b.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size)));
    b.positions.push_back(static_cast<int32_t>(ctx));
    b.token_seq.push_back(static_cast<int32_t>(s));
    b.logit_rows.push_back(static_cast<int32_t>(s));
    for (int64_t p = 0; p < pages; ++p) b.block_table.push_back(static_cast<int32_t>(s * pages + p));
  }
  return b;
}

}  // namespace evt::cli
