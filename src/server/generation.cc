#include "server/generation.h"

#include <algorithm>

namespace evt::server {

Generation::Generation(engine::Engine& engine, const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops,
                       ServerMetrics& metrics, Clock::time_point arrival)
    : engine_(engine),
      tokenizer_(tokenizer),
      decoder_(tokenizer, /*skip_special=*/true),
      stops_(std::move(stops)),
      metrics_(metrics),
      arrival_(arrival) {}

engine::TokenCallback Generation::callback() const {
  return [queue = queue_](const engine::TokenEvent& e) {
    std::lock_guard lock(queue->mutex);
    queue->events.push_back({e, Clock::now()});
    queue->ready.notify_one();
  };
}

Generation::Timed Generation::wait() {
  std::unique_lock lock(queue_->mutex);
  queue_->ready.wait(lock, [this] { return !queue_->events.empty(); });
  Timed t = std::move(queue_->events.front());
  queue_->events.pop_front();
  return t;
}

bool Generation::ready_within(std::chrono::milliseconds timeout) {
  std::unique_lock lock(queue_->mutex);
  return queue_->ready.wait_for(lock, timeout, [this] { return !queue_->events.empty(); });
}

Expected<std::string> Generation::text_of(int32_t token) {
  // A model's vocab may be padded beyond its tokenizer's (Qwen3: 151,936 rows for 151,669
  // tokens); as in vLLM, an id no token has decodes to nothing.
  if (!tokenizer_.token_bytes(token)) return std::string();
  EVT_ASSIGN_OR_RETURN(std::string piece, decoder_.push(token));
  // The decoder returns whole UTF-8 characters: one lead byte each.
  decoded_chars_ += std::count_if(piece.begin(), piece.end(), [](char c) { return (c & 0xC0) != 0x80; });
  return stops_.push(piece);
}

LogprobsEntry Generation::named(int32_t token, const engine::TokenLogprobs& logprobs) const {
  // Ids the tokenizer lacks (a model's vocab may be padded beyond it) show as empty tokens.
  const auto bytes = [this](int32_t id) { return std::string(tokenizer_.token_bytes(id).value_or("")); };
  LogprobsEntry entry{.chosen = {bytes(token), logprobs.logprob}, .top = {}, .text_offset = decoded_chars_};
  for (const auto& [id, logprob] : logprobs.top) entry.top.push_back({bytes(id), logprob});
  return entry;
}

Generation::Piece Generation::next() {
  const Timed t = wait();
  const engine::TokenEvent& e = t.event;
  Piece p;
  if (e.token >= 0) {
    ++output_tokens_;
    const double since_ms = std::chrono::duration<double, std::milli>(t.at - (output_tokens_ == 1 ? arrival_ : last_token_)).count();
    if (output_tokens_ == 1) {
      ttft_ms_ = since_ms;
      metrics_.observe_ttft(since_ms / 1e3);
    } else {
      metrics_.observe_inter_token(since_ms / 1e3);
    }
    last_token_ = t.at;
    if (e.logprobs) p.logprobs = named(e.token, *e.logprobs);
    Expected<std::string> text = text_of(e.token);
    if (!text.ok()) {
      abort();
      p.error = text.status().message();
      done_ = true;
      return p;
    }
    p.text = std::move(*text);
    if (stops_.stopped()) {
      // The engine would go on to max_tokens; its pages go back now.
      engine_.abort(id_);
      p.finish_reason = "stop";
      done_ = true;
      return p;
    }
  }
  switch (e.finish) {
    case engine::FinishReason::kNone:
      return p;
    case engine::FinishReason::kStop:
    case engine::FinishReason::kLength:
      p.text += stops_.push(decoder_.flush());
      p.text += stops_.flush();
      p.finish_reason = e.finish == engine::FinishReason::kStop || stops_.stopped() ? "stop" : "length";
      break;
    case engine::FinishReason::kAbort:
      p.error = "the request was aborted (the server is shutting down)";
      break;
    case engine::FinishReason::kError:
      p.error = e.error;
      break;
  }
  done_ = true;
  return p;
}

void Generation::abort() {
  if (!done_ && id_ >= 0) engine_.abort(id_);
  done_ = true;
}

}  // namespace evt::server
