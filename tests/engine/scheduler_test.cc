// The scheduler's policy, step by step, without a model: FCFS with decodes first, the token
// budget and chunk size, whole-prompt mode, the admission watermark, preemption of the newest
// sequence with recompute, and a randomized run whose invariants hold at every step.

#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <random>

namespace evt::engine {
namespace {

constexpr int64_t kPage = 4;

std::unique_ptr<Sequence> make_seq(RequestId id, int64_t prompt, int64_t max_tokens = 8) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens.assign(static_cast<size_t>(prompt), 1);
  s->prompt_tokens = prompt;
  s->params.max_tokens = max_tokens;
  return s;
}

// (id, tokens) of each chunk, in the step's order.
std::vector<std::pair<RequestId, int64_t>> chunks(const Schedule& s) {
  std::vector<std::pair<RequestId, int64_t>> out;
  for (const ScheduledChunk& c : s.chunks) out.emplace_back(c.seq->id, c.tokens);
  return out;
}

// Runs a step as the engine would: the chunks' tokens enter the cache and each chunk that
// reaches its sequence's end gets a new token.
void run(Scheduler& sched, const Schedule& s) {
  std::vector<Sequence*> sampled;
  for (const ScheduledChunk& c : s.chunks) sampled.push_back(c.samples() ? c.seq : nullptr);
  sched.complete(s);
  for (Sequence* seq : sampled) {
    if (seq != nullptr) seq->tokens.push_back(2);
  }
}

using Chunks = std::vector<std::pair<RequestId, int64_t>>;

TEST(Scheduler, ChunksPrefillsWithinTheBudgetAndPutsDecodesFirst) {
  model::KvPages pool(64);
  Scheduler sched({.max_batched_tokens = 8, .chunk_size = 4, .max_sequences = 8, .watermark = 0}, pool, kPage);
  sched.add(make_seq(0, 10));
  sched.add(make_seq(1, 5));
  sched.add(make_seq(2, 3));
  Schedule s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 4}, {1, 4}}));  // the budget stops admission of 2
  run(sched, s);
  s = sched.schedule();
  // 1 has one token left, which runs like a decode; 2's whole prompt fits; both sample.
  EXPECT_EQ(chunks(s), (Chunks{{1, 1}, {0, 4}, {2, 3}}));
  EXPECT_TRUE(s.chunks[0].samples());
  EXPECT_FALSE(s.chunks[1].samples());
  EXPECT_TRUE(s.chunks[2].samples());
  run(sched, s);
  s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{1, 1}, {2, 1}, {0, 2}}));  // decodes first, then 0's last chunk
  EXPECT_EQ(s.tokens(), 4);
}

TEST(Scheduler, WholePromptModeNeverSplitsAPrompt) {
  model::KvPages pool(64);
  Scheduler sched({.max_batched_tokens = 8, .chunk_size = 0, .max_sequences = 8, .watermark = 0}, pool, kPage);
  sched.add(make_seq(0, 6));
  sched.add(make_seq(1, 5));
  Schedule s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 6}}));  // 1 does not fit the 2 tokens left and waits whole
  run(sched, s);
  s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 1}, {1, 5}}));
}

TEST(Scheduler, SequenceLimitAndFcfsAdmission) {
  model::KvPages pool(64);
  Scheduler sched({.max_batched_tokens = 100, .chunk_size = 16, .max_sequences = 2, .watermark = 0}, pool, kPage);
  for (RequestId id = 0; id < 4; ++id) sched.add(make_seq(id, 2));
  Schedule s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 2}, {1, 2}}));
  EXPECT_EQ(sched.waiting(), 2);
  auto removed = sched.remove(0);
  ASSERT_NE(removed, nullptr);
  EXPECT_EQ(pool.used(), 1);  // 0's page is back
  run(sched, s);
  s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{1, 1}, {2, 2}}));
  EXPECT_EQ(sched.remove(99), nullptr);
}

TEST(Scheduler, WatermarkHoldsBackAdmissionWhileOthersRun) {
  model::KvPages pool(10);
  Scheduler sched({.max_batched_tokens = 100, .chunk_size = 100, .max_sequences = 8, .watermark = 0.2}, pool, kPage);
  sched.add(make_seq(0, 16));  // 4 pages; alone, so the watermark does not apply
  Schedule s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 16}}));
  run(sched, s);
  // 0's decode takes a 5th page. 1 takes 3 more and leaves the 2 the watermark asks for; 2's
  // one page would leave 1, so it waits.
  sched.add(make_seq(1, 12));
  sched.add(make_seq(2, 4));
  s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 1}, {1, 12}}));
  EXPECT_EQ(sched.waiting(), 1);
  EXPECT_EQ(pool.free(), 2);
}

TEST(Scheduler, PreemptsTheNewestAndRecomputesItLater) {
  model::KvPages pool(4);  // 16 positions
  Scheduler sched({.max_batched_tokens = 100, .chunk_size = 100, .max_sequences = 8, .watermark = 0}, pool, kPage);
  sched.add(make_seq(0, 8));
  sched.add(make_seq(1, 8));
  Schedule s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 8}, {1, 8}}));  // the pool is full
  run(sched, s);
  // Both need a 3rd page for position 8: 0 (the oldest) preempts 1, then runs.
  s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 1}}));
  EXPECT_EQ(s.preempted, 1);
  EXPECT_EQ(sched.waiting(), 1);
  EXPECT_EQ(pool.used(), 3);
  run(sched, s);
  // 1 comes back when there is room, with its prompt and its one output to prefill again.
  ASSERT_NE(sched.remove(0), nullptr);
  s = sched.schedule();
  ASSERT_EQ(chunks(s), (Chunks{{1, 9}}));
  EXPECT_TRUE(s.chunks[0].samples());
}

TEST(Scheduler, ASequenceThatCannotGrowPreemptsItselfWhenItIsTheNewest) {
  model::KvPages pool(4);
  Scheduler sched({.max_batched_tokens = 100, .chunk_size = 100, .max_sequences = 8, .watermark = 0}, pool, kPage);
  sched.add(make_seq(0, 11));  // 3 pages
  sched.add(make_seq(1, 4));   // the last page
  Schedule s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 11}, {1, 4}}));
  run(sched, s);
  // 0's position 11 is in its 3rd page; 1's position 4 needs a 2nd page and 1 is the newest.
  s = sched.schedule();
  EXPECT_EQ(chunks(s), (Chunks{{0, 1}}));
  EXPECT_EQ(s.preempted, 1);
  EXPECT_EQ(sched.running(), 1);
  EXPECT_EQ(sched.waiting(), 1);
  EXPECT_EQ(pool.used(), 3);
}

// Random requests through a small pool, each running to max_tokens: every step keeps the
// budget and the sequence limit, the pages in use are exactly those the sequences hold, every
// request finishes with all its tokens, and the pool ends empty.
TEST(Scheduler, RandomWorkloadsKeepTheInvariantsAndFinish) {
  int64_t preempted = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    const int64_t pages = pick(8, 24);
    model::KvPages pool(pages);
    const SchedulerOptions o{.max_batched_tokens = pick(4, 40), .chunk_size = pick(0, 1) ? pick(1, 12) : 0,
                             .max_sequences = pick(1, 6), .watermark = pick(0, 1) ? 0.1 : 0};
    Scheduler sched(o, pool, kPage);
    const int64_t requests = pick(1, 12);
    std::vector<Sequence*> live;
    int64_t arrived = 0, finished = 0;
    const int64_t longest = std::min(pages * kPage, o.chunk_size == 0 ? o.max_batched_tokens : pages * kPage);
    for (int step = 0; step < 10000 && finished < requests; ++step) {
      if (arrived < requests && pick(0, 2) == 0) {
        const int64_t max_tokens = pick(1, std::max<int64_t>(1, longest / 2));
        auto seq = make_seq(arrived++, pick(1, longest - max_tokens), max_tokens);
        live.push_back(seq.get());
        sched.add(std::move(seq));
      }
      const Schedule s = sched.schedule();
      preempted += s.preempted;
      ASSERT_LE(s.tokens(), o.max_batched_tokens) << "seed " << seed;
      ASSERT_LE(static_cast<int64_t>(s.chunks.size()), o.max_sequences) << "seed " << seed;
      if (sched.running() + sched.waiting() > 0) {
        ASSERT_FALSE(s.chunks.empty()) << "seed " << seed << " stalled";
      }
      run(sched, s);
      int64_t held = 0;
      for (Sequence* seq : live) held += static_cast<int64_t>(seq->pages.size());
      ASSERT_EQ(held, pool.used()) << "seed " << seed;
      for (auto it = live.begin(); it != live.end();) {
        Sequence* seq = *it;
        if (seq->outputs() < seq->params.max_tokens) {
          ++it;
          continue;
        }
        EXPECT_EQ(seq->computed, static_cast<int64_t>(seq->tokens.size()) - 1);
        ASSERT_NE(sched.remove(seq->id), nullptr);
        it = live.erase(it);
        ++finished;
      }
    }
    EXPECT_EQ(finished, requests) << "seed " << seed;
    EXPECT_EQ(pool.used(), 0) << "seed " << seed;
  }
  EXPECT_GT(preempted, 0) << "no workload exercised preemption";
}

}  // namespace
}  // namespace evt::engine
