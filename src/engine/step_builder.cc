#include "engine/step_builder.h"

#include <algorithm>

#include "kernels/llm/sample.h"

namespace evt::engine {

namespace llm = kernels::llm;

namespace {

// A chunk that does not reach its sequence's end samples nothing the engine keeps: greedy, so
// the sample task takes its cheapest path.
llm::SampleParams sample_params(const ScheduledChunk& c) {
  llm::SampleParams p;
  if (!c.samples()) return p;
  const SamplingParams& r = c.seq->params;
  p.temperature = r.temperature;
  p.top_k = r.top_k;
  p.top_p = r.top_p;
  p.min_p = r.min_p;
  p.presence = r.presence_penalty;
  p.frequency = r.frequency_penalty;
  p.seed = c.seq->seed;
  // The draw depends on which output this is, not on the step or the batch, so a request's
  // tokens come out the same alone, batched or after a preemption.
  p.counter = static_cast<uint32_t>(c.seq->outputs());
  return p;
}

bool penalized(const ScheduledChunk& c) {
  return c.samples() && (c.seq->params.presence_penalty != 0 || c.seq->params.frequency_penalty != 0);
}

}  // namespace

model::StepBatch build_step(const Schedule& s) {
  model::StepBatch b;
  size_t width = 1;
  for (const ScheduledChunk& c : s.chunks) width = std::max(width, c.seq->pages.size());
  b.pages_per_seq = static_cast<int64_t>(width);
  b.block_table.assign(s.chunks.size() * width, 0);
  b.sample_words.assign(s.chunks.size() * llm::kSampleWords, 0);
  b.penalty_start.push_back(0);
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const ScheduledChunk& c = s.chunks[i];
    const Sequence& seq = *c.seq;
    for (int64_t p = seq.computed; p < seq.computed + c.tokens; ++p) {
      b.ids.push_back(seq.tokens[static_cast<size_t>(p)]);
      b.positions.push_back(static_cast<int32_t>(p));
      b.token_seq.push_back(static_cast<int32_t>(i));
    }
    b.logit_rows.push_back(static_cast<int32_t>(b.ids.size() - 1));
    std::copy(seq.pages.begin(), seq.pages.end(), b.block_table.begin() + static_cast<ptrdiff_t>(i * width));
    llm::pack_sample_row(sample_params(c), b.sample_words.data() + i * llm::kSampleWords);
    if (penalized(c)) {
      for (const auto& [token, count] : seq.output_counts) {
        b.penalties.push_back(token);
        b.penalties.push_back(count);
      }
    }
    b.penalty_start.push_back(static_cast<int32_t>(b.penalties.size() / 2));
  }
  return b;
}

}  // namespace evt::engine
