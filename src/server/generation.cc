#include "server/generation.h"

namespace evt::server {

Generation::Generation(engine::Engine& engine, const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops,
                       ServerMetrics& metrics, Clock::time_point arrival)
    : engine_(engine),
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

Expected<std::string> Generation::text_of(int32_t token) {
  EVT_ASSIGN_OR_RETURN(std::string piece, decoder_.push(token));
  return stops_.push(piece);
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
