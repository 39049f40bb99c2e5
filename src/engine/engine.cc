#include "engine/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "engine/step_builder.h"
#include "util/check.h"

namespace evt::engine {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
  }
  return "?";
}

Expected<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<model::Decoder> decoder, const EngineOptions& o) {
  const SchedulerOptions& s = o.scheduler;
  if (s.max_batched_tokens < 1) return error("max_batched_tokens must be at least 1, got {}", s.max_batched_tokens);
  if (s.chunk_size < 0) return error("chunk_size must be 0 (whole prompts) or positive, got {}", s.chunk_size);
  if (s.max_sequences < 1) return error("max_sequences must be at least 1, got {}", s.max_sequences);
  if (!(s.watermark >= 0 && s.watermark < 1)) return error("the KV watermark must be in [0, 1), got {}", s.watermark);
  if (o.max_waiting < 1) return error("max_waiting must be at least 1, got {}", o.max_waiting);
  return std::unique_ptr<Engine>(new Engine(std::move(decoder), o));
}

Engine::Engine(std::unique_ptr<model::Decoder> decoder, const EngineOptions& o)
    : decoder_(std::move(decoder)),
      options_(o),
      pool_(decoder_->kv().pages),
      scheduler_(o.scheduler, pool_, decoder_->kv().page_size),
      seeds_(o.seed) {
  // A request must fit the pool alone (so the oldest can always run), the model's positions,
  // and, without chunking, one step: a preempted sequence is prefilled again whole.
  max_context_ = pool_.capacity() * decoder_->kv().page_size;
  const int64_t positions = decoder_->config().max_position_embeddings;
  if (positions > 0) max_context_ = std::min(max_context_, positions);
  if (o.scheduler.chunk_size == 0) max_context_ = std::min(max_context_, o.scheduler.max_batched_tokens);
  counted_.kv_pages_total = pool_.capacity();
  metrics_.kv_pages_total = pool_.capacity();
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<Outgoing> out;
  drain_inbox(out);
  for (RequestId id : scheduler_.ids()) finish(id, FinishReason::kAbort, "the engine shut down", out);
  for (Outgoing& o : out) (*o.callback)(o.event);
}

Status Engine::validate(const Request& r) const {
  const int64_t vocab = decoder_->config().vocab_size;
  if (r.prompt.empty()) return error("the prompt is empty");
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab) {
      return error("prompt token {} is id {}, outside the vocab of {}", i, r.prompt[i], vocab);
    }
  }
  return engine::validate(r.sampling, vocab);
}

Submission Engine::submit(Request request, TokenCallback callback) {
  if (Status s = validate(request); !s.ok()) return {.id = -1, .rejection = Rejection::kInvalid, .error = s.message()};
  const auto prompt = static_cast<int64_t>(request.prompt.size());
  if (prompt + request.sampling.max_tokens > max_context_) {
    return {.id = -1,
            .rejection = Rejection::kTooLong,
            .error = fmt::format("the prompt ({} tokens) plus max_tokens ({}) needs {} positions; this engine "
                                 "serves at most {}",
                                 prompt, request.sampling.max_tokens, prompt + request.sampling.max_tokens,
                                 max_context_)};
  }
  auto seq = std::make_unique<Sequence>();
  seq->tokens = std::move(request.prompt);
  seq->prompt_tokens = prompt;
  seq->params = std::move(request.sampling);
  seq->callback = std::make_shared<const TokenCallback>(std::move(callback));
  std::lock_guard lock(mutex_);
  const auto queued = static_cast<int64_t>(inbox_.size()) + metrics_.waiting;
  if (queued >= options_.max_waiting) {
    return {.id = -1,
            .rejection = Rejection::kBusy,
            .error = fmt::format("the engine is busy: {} requests are already waiting", queued)};
  }
  seq->id = next_id_++;
  seq->seed = seq->params.seed.value_or(seeds_());
  const RequestId id = seq->id;
  inbox_.push_back(std::move(seq));
  wake_.notify_one();
  return {.id = id, .rejection = Rejection::kNone, .error = {}};
}

void Engine::abort(RequestId id) {
  std::lock_guard lock(mutex_);
  aborts_.push_back(id);
  wake_.notify_one();
}

void Engine::drain_inbox(std::vector<Outgoing>& out) {
  std::vector<std::unique_ptr<Sequence>> arrived;
  std::vector<RequestId> aborts;
  {
    std::lock_guard lock(mutex_);
    arrived.swap(inbox_);
    aborts.swap(aborts_);
  }
  for (auto& seq : arrived) {
    counted_.prompt_tokens += seq->prompt_tokens;
    scheduler_.add(std::move(seq));
  }
  for (RequestId id : aborts) finish(id, FinishReason::kAbort, "", out);
}

void Engine::finish(RequestId id, FinishReason reason, const std::string& error, std::vector<Outgoing>& out) {
  std::unique_ptr<Sequence> seq = scheduler_.remove(id);
  if (!seq) return;
  out.push_back({seq->callback, {.request = id, .token = -1, .finish = reason, .error = error}});
  ++counted_.requests_finished;
}

void Engine::accept_token(Sequence& seq, int32_t token, std::optional<TokenLogprobs> logprobs,
                          std::vector<Outgoing>& out) {
  seq.tokens.push_back(token);
  const SamplingParams& p = seq.params;
  if (p.presence_penalty != 0 || p.frequency_penalty != 0) ++seq.output_counts[token];
  ++counted_.generated_tokens;
  const auto is = [token](const auto& ids) { return std::find(ids.begin(), ids.end(), token) != ids.end(); };
  FinishReason reason = FinishReason::kNone;
  if (is(p.stop_token_ids) || (!p.ignore_eos && is(decoder_->config().eos_token_ids))) {
    reason = FinishReason::kStop;
  } else if (seq.outputs() >= p.max_tokens) {
    reason = FinishReason::kLength;
  }
  out.push_back({seq.callback,
                 {.request = seq.id, .token = token, .finish = reason, .error = {}, .logprobs = std::move(logprobs)}});
  if (reason != FinishReason::kNone) {
    scheduler_.remove(seq.id);  // destroys seq
    ++counted_.requests_finished;
  }
}

void Engine::fail_all(const std::string& error, std::vector<Outgoing>& out) {
  for (RequestId id : scheduler_.ids()) finish(id, FinishReason::kError, error, out);
}

void Engine::publish(const Schedule* ran) {
  std::lock_guard lock(mutex_);
  if (ran != nullptr) {
    ++counted_.steps;
    counted_.preemptions += ran->preempted;
    shapes_.emplace(ran->tokens(), static_cast<int64_t>(ran->chunks.size()));
  }
  metrics_ = counted_;
  metrics_.running = scheduler_.running();
  metrics_.waiting = scheduler_.waiting();
  metrics_.kv_pages_used = pool_.used();
  metrics_.batch_shapes = static_cast<int64_t>(shapes_.size());
}

Expected<bool> Engine::step() {
  std::vector<Outgoing> out;
  const auto deliver = [&out] {
    for (Outgoing& o : out) (*o.callback)(o.event);
  };
  drain_inbox(out);
  const Schedule s = scheduler_.schedule();
  if (s.chunks.empty()) {
    const bool stuck = scheduler_.waiting() > 0;
    if (stuck) fail_all("the scheduler could not place the oldest waiting request (an engine bug)", out);
    publish(nullptr);
    deliver();
    if (stuck) return error("engine: requests are waiting but none can be scheduled");
    return false;
  }
  // Logits come back to the host only on steps where a sampled sequence wants logprobs. That
  // copies the whole S x V float logits of the step (for Qwen3's V = 151,936: 594 KiB per
  // sequence of the batch) and costs a log-softmax and a top-k pass over V per such sequence;
  // other steps copy nothing.
  const bool want_logits = std::any_of(s.chunks.begin(), s.chunks.end(), [](const ScheduledChunk& c) {
    return c.samples() && c.seq->params.logprobs.has_value();
  });
  Expected<model::StepOutput> result = decoder_->step(build_step(s), want_logits);
  if (!result.ok()) {
    const std::string message = fmt::format("step of {} tokens from {} sequences failed: {}", s.tokens(),
                                            s.chunks.size(), result.status().message());
    fail_all(message, out);
    publish(&s);
    deliver();
    return error("engine: {}", message);
  }
  std::vector<Sequence*> sampled;  // chunks that reached their sequence's end, before complete() moves it
  for (const ScheduledChunk& c : s.chunks) sampled.push_back(c.samples() ? c.seq : nullptr);
  scheduler_.complete(s);
  const auto vocab = static_cast<size_t>(decoder_->config().vocab_size);
  for (size_t i = 0; i < sampled.size(); ++i) {
    if (sampled[i] == nullptr) continue;
    std::optional<TokenLogprobs> logprobs;
    if (const std::optional<int32_t> top_n = sampled[i]->params.logprobs) {
      EVT_CHECK(result->logits.size() == sampled.size() * vocab) << "the step returned no logits";
      logprobs = token_logprobs(std::span(result->logits).subspan(i * vocab, vocab), result->next[i], *top_n);
    }
    accept_token(*sampled[i], result->next[i], std::move(logprobs), out);
  }
  publish(&s);
  deliver();
  return true;
}

Status Engine::run_until_idle() {
  for (;;) {
    EVT_ASSIGN_OR_RETURN(const bool ran, step());
    if (!ran) return Status();
  }
}

void Engine::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

void Engine::loop() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    Expected<bool> ran = step();
    if (!ran.ok()) fmt::print(stderr, "{}\n", ran.status().message());
    if (ran.ok() && *ran) continue;
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !aborts_.empty(); });
  }
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lock(mutex_);
  return metrics_;
}

}  // namespace evt::engine
