#pragma once
// Continuous batching with chunked prefill (seed 003): each step, which sequences run and how
// many of their tokens. Policy, FCFS with decodes first:
//   1. every running sequence that is decoding gets its one token, oldest first;
//   2. running sequences still prefilling get their next chunk (at most chunk_size tokens), oldest
//      first;
//   3. waiting requests are admitted in arrival order while the step's token budget, the sequence
//      limit and the KV pool allow; the first that does not fit stops admission (no overtaking),
//      and admission keeps a watermark of free pages so a new prompt does not force the next
//      decode step to preempt.
// A running sequence that cannot get the page it needs preempts the newest running sequence
// (possibly itself): its pages are freed and it goes back to the waiting queue, to be prefilled
// again from its prompt and the tokens it had generated (recompute). The oldest sequence can
// always run: the engine admits no request that could not fit the pool alone.
//
// Pure bookkeeping over KvPages: it runs no model, so its tests drive it step by step.

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/sequence.h"
#include "model/kv_pages.h"

namespace evt::engine {

struct SchedulerOptions {
  int64_t max_batched_tokens = 2048;  // tokens per step
  int64_t chunk_size = 512;           // prefill tokens per sequence per step; 0: whole prompts
  int64_t max_sequences = 256;        // sequences per step
  double watermark = 0.01;            // fraction of the pool admission leaves free
};

// seq runs its tokens [computed, computed + tokens) in this step.
struct ScheduledChunk {
  Sequence* seq;
  int64_t tokens;
  // The chunk reaches the end of seq's tokens, so its logits give the next token.
  bool samples() const { return seq->computed + tokens == static_cast<int64_t>(seq->tokens.size()); }
};

struct Schedule {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  int64_t preempted = 0;               // sequences sent back to waiting by this call
  int64_t tokens() const;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, model::KvPages& pool, int64_t page_size);

  // Queues a new request behind every waiting one.
  void add(std::unique_ptr<Sequence> seq);
  Schedule schedule();
  // Marks a scheduled step as run: each chunk's tokens are now in the cache.
  void complete(const Schedule& s);
  // Removes a sequence, waiting or running, and frees its pages; null if it is not here.
  std::unique_ptr<Sequence> remove(RequestId id);

  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t running() const { return static_cast<int64_t>(running_.size()); }
  const SchedulerOptions& options() const { return options_; }
  // Every sequence, running first, for shutting down.
  std::vector<RequestId> ids() const;

 private:
  // Reserves pages for seq to hold `positions` positions, preempting the newest running
  // sequences until it fits; false if seq itself was preempted.
  bool reserve_or_preempt(Sequence* seq, int64_t positions, Schedule& s, int64_t& budget);
  void preempt(size_t running_index, Schedule& s, int64_t& budget);
  int64_t prefill_chunk(const Sequence& seq, int64_t budget) const;

  SchedulerOptions options_;
  model::KvPages& pool_;
  int64_t page_size_;
  // Waiting in arrival order (preempted sequences go back by their arrival); running in
  // admission order, so the back is the newest and the first to be preempted.
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
};

}  // namespace evt::engine
