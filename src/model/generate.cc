#include "model/generate.h"

#include <algorithm>
#include <chrono>

#include "model/kv_pages.h"

namespace evt::model {

namespace {

struct Running {
  size_t prompt;                // index into the prompts and the result
  std::vector<int32_t> pages;   // its block-table row
  int64_t length = 0;           // positions in the cache after this step
  bool done = false;
};

// Lays out the rows of `seqs` as a block table as wide as the longest of them.
void fill_block_table(const std::vector<Running*>& seqs, StepBatch& batch) {
  size_t width = 1;
  for (const Running* s : seqs) width = std::max(width, s->pages.size());
  batch.pages_per_seq = static_cast<int64_t>(width);
  batch.block_table.assign(seqs.size() * width, 0);
  for (size_t i = 0; i < seqs.size(); ++i) std::copy(seqs[i]->pages.begin(), seqs[i]->pages.end(), batch.block_table.begin() + i * width);
}

}  // namespace

Expected<GenerateResult> generate(Decoder& decoder, const std::vector<std::vector<int32_t>>& prompts,
                                  const GenerateOptions& options) {
  const ModelConfig& config = decoder.config();
  const KvGeometry kv = decoder.kv();
  if (prompts.empty()) return error("generate: no prompts");
  if (options.max_tokens < 1) return error("generate: max_tokens must be at least 1, got {}", options.max_tokens);
  KvPages pool(kv.pages);
  std::vector<Running> seqs(prompts.size());
  GenerateResult result;
  result.sequences.resize(prompts.size());

  // Returns every page, whatever happens to the loop.
  struct ReleaseAll {
    KvPages& pool;
    std::vector<Running>& seqs;
    ~ReleaseAll() {
      for (Running& s : seqs) pool.release(s.pages);
    }
  } release{pool, seqs};

  auto run = [&](const std::vector<Running*>& active, StepBatch& batch, size_t step) -> Status {
    fill_block_table(active, batch);
    const bool keep = static_cast<int64_t>(step) < options.logit_steps;
    const auto start = std::chrono::steady_clock::now();
    EVT_ASSIGN_OR_RETURN(StepOutput out, decoder.step(batch, keep));
    result.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    for (size_t i = 0; i < active.size(); ++i) {
      SequenceOutput& o = result.sequences[active[i]->prompt];
      o.tokens.push_back(out.next[i]);
      if (keep) {
        o.logits.emplace_back(out.logits.begin() + static_cast<int64_t>(i) * config.vocab_size,
                              out.logits.begin() + static_cast<int64_t>(i + 1) * config.vocab_size);
      }
      const bool eos = options.stop_at_eos && std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(),
                                                        out.next[i]) != config.eos_token_ids.end();
      if (eos || static_cast<int64_t>(o.tokens.size()) >= options.max_tokens) active[i]->done = true;
    }
    return Status();
  };

  // Prefill: every prompt token in one step.
  StepBatch batch;
  std::vector<Running*> active;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) return error("generate: prompt {} is empty", i);
    for (size_t t = 0; t < prompts[i].size(); ++t) {
      if (prompts[i][t] < 0 || prompts[i][t] >= config.vocab_size) {
        return error("generate: prompt {} token {} is id {}, outside the vocab of {}", i, t, prompts[i][t],
                     config.vocab_size);
      }
    }
    Running& s = seqs[i];
    s.prompt = i;
    s.length = static_cast<int64_t>(prompts[i].size());
    if (s.length + options.max_tokens > config.max_position_embeddings && config.max_position_embeddings > 0) {
      return error("generate: prompt {} ({} tokens) plus {} new tokens exceeds the model's {} positions", i, s.length,
                   options.max_tokens, config.max_position_embeddings);
    }
    if (Status st = pool.reserve(s.pages, s.length, kv.page_size); !st.ok()) return error("prompt {}: {}", i, st.message());
    for (int64_t p = 0; p < s.length; ++p) {
      batch.ids.push_back(prompts[i][p]);
      batch.positions.push_back(static_cast<int32_t>(p));
      batch.token_seq.push_back(static_cast<int32_t>(i));
    }
    batch.logit_rows.push_back(static_cast<int32_t>(batch.ids.size() - 1));
    active.push_back(&s);
  }
  EVT_RETURN_IF_ERROR(run(active, batch, 0));

  // Decode: one token per running sequence per step.
  for (size_t step = 1;; ++step) {
    std::erase_if(active, [](const Running* s) { return s->done; });
    if (active.empty()) break;
    batch = StepBatch{};
    for (size_t i = 0; i < active.size(); ++i) {
      Running& s = *active[i];
      EVT_RETURN_IF_ERROR(pool.reserve(s.pages, s.length + 1, kv.page_size));
      batch.ids.push_back(result.sequences[s.prompt].tokens.back());
      batch.positions.push_back(static_cast<int32_t>(s.length));
      batch.token_seq.push_back(static_cast<int32_t>(i));
      batch.logit_rows.push_back(static_cast<int32_t>(i));
      ++s.length;
    }
    EVT_RETURN_IF_ERROR(run(active, batch, step));
  }
  return result;
}

}  // namespace evt::model
