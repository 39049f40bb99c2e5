#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace evt::engine {

int64_t Schedule::tokens() const {
  int64_t n = 0;
  for (const ScheduledChunk& c : chunks) n += c.tokens;
  return n;
}

Scheduler::Scheduler(const SchedulerOptions& options, model::KvPages& pool, int64_t page_size)
    : options_(options), pool_(pool), page_size_(page_size) {
  EVT_CHECK(options.max_batched_tokens > 0 && options.max_sequences > 0 && options.chunk_size >= 0 && page_size > 0);
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

int64_t Scheduler::prefill_chunk(const Sequence& seq, int64_t budget) const {
  const int64_t pending = seq.pending();
  if (options_.chunk_size == 0) return pending <= budget ? pending : 0;  // whole prompts only
  return std::min({pending, options_.chunk_size, budget});
}

void Scheduler::preempt(size_t running_index, Schedule& s, int64_t& budget) {
  std::unique_ptr<Sequence> victim = std::move(running_[running_index]);
  running_.erase(running_.begin() + static_cast<ptrdiff_t>(running_index));
  auto chunk = std::find_if(s.chunks.begin(), s.chunks.end(), [&](const ScheduledChunk& c) { return c.seq == victim.get(); });
  if (chunk != s.chunks.end()) {
    budget += chunk->tokens;
    s.chunks.erase(chunk);
  }
  pool_.release(victim->pages);
  victim->computed = 0;
  ++s.preempted;
  // Back among the waiting by arrival (ids grow with arrival), so it is admitted before newer requests.
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return w->id > victim->id; });
  waiting_.insert(at, std::move(victim));
}

bool Scheduler::reserve_or_preempt(Sequence* seq, int64_t positions, Schedule& s, int64_t& budget) {
  while (!pool_.reserve(seq->pages, positions, page_size_).ok()) {
    const size_t newest = running_.size() - 1;
    const bool self = running_[newest].get() == seq;
    preempt(newest, s, budget);
    if (self) return false;
  }
  return true;
}

Schedule Scheduler::schedule() {
  Schedule s;
  int64_t budget = options_.max_batched_tokens;
  const auto full = [&] { return static_cast<int64_t>(s.chunks.size()) >= options_.max_sequences; };

  // 1. Decodes, oldest first. Preemption only removes from the back of running_, so when seq
  //    preempts itself nothing is left after it.
  for (size_t i = 0; i < running_.size() && budget > 0 && !full(); ++i) {
    Sequence* seq = running_[i].get();
    if (seq->pending() != 1) continue;
    if (!reserve_or_preempt(seq, seq->computed + 1, s, budget)) break;
    s.chunks.push_back({seq, 1});
    --budget;
  }
  // 2. Prefills under way, oldest first.
  for (size_t i = 0; i < running_.size() && !full(); ++i) {
    Sequence* seq = running_[i].get();
    if (seq->pending() <= 1) continue;
    const int64_t n = prefill_chunk(*seq, budget);
    if (n == 0) break;
    if (!reserve_or_preempt(seq, seq->computed + n, s, budget)) break;
    s.chunks.push_back({seq, n});
    budget -= n;
  }
  // 3. Admission in arrival order; new requests never preempt.
  const auto watermark = static_cast<int64_t>(std::ceil(options_.watermark * static_cast<double>(pool_.capacity())));
  while (!waiting_.empty() && !full()) {
    Sequence* seq = waiting_.front().get();
    const int64_t n = prefill_chunk(*seq, budget);
    if (n == 0) break;
    const int64_t need = (seq->computed + n + page_size_ - 1) / page_size_ - static_cast<int64_t>(seq->pages.size());
    if (need > pool_.free() - (running_.empty() ? 0 : watermark)) break;
    EVT_CHECK(pool_.reserve(seq->pages, seq->computed + n, page_size_).ok());
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    s.chunks.push_back({seq, n});
    budget -= n;
  }
  return s;
}

void Scheduler::complete(const Schedule& s) {
  for (const ScheduledChunk& c : s.chunks) c.seq->computed += c.tokens;
}

std::unique_ptr<Sequence> Scheduler::remove(RequestId id) {
  std::unique_ptr<Sequence> found;
  auto take = [&](auto& list) {
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& s) { return s->id == id; });
    if (it == list.end()) return;
    found = std::move(*it);
    list.erase(it);
  };
  take(running_);
  if (!found) take(waiting_);
  if (found) pool_.release(found->pages);
  return found;
}

std::vector<RequestId> Scheduler::ids() const {
  std::vector<RequestId> ids;
  for (const auto& s : running_) ids.push_back(s->id);
  for (const auto& s : waiting_) ids.push_back(s->id);
  return ids;
}

}  // namespace evt::engine
