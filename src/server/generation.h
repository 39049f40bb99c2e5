#pragma once
// One request in flight, between the engine and an HTTP handler thread. The engine's callback
// (on the engine thread) only queues the events; the handler takes them through next(), which
// turns tokens into text with the incremental decoder (never a partial UTF-8 character), cuts
// the text at the first stop string (ending the engine request there), times the tokens, and
// names the tokens of their logprobs.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/stop_strings.h"
#include "tokenizer/incremental_decoder.h"

namespace evt::server {

using Clock = std::chrono::steady_clock;

class Generation {
 public:
  Generation(engine::Engine& engine, const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops,
             ServerMetrics& metrics, Clock::time_point arrival);

  // The callback to submit with; it keeps the event queue alive on its own, so the handler may
  // return before the engine's last event.
  engine::TokenCallback callback() const;
  void started(engine::RequestId id) { id_ = id; }

  struct Piece {
    std::string text;
    std::optional<std::string> finish_reason;  // set on the last piece: "stop" or "length"
    std::string error;                         // set when the request failed or was aborted
    std::optional<LogprobsEntry> logprobs;     // the piece's token's, when the request asked
  };
  // Waits for the next event. After the last piece, done() is true.
  Piece next();
  // Waits at most `timeout` for an event; true when next() would return without waiting.
  bool ready_within(std::chrono::milliseconds timeout);
  bool done() const { return done_; }
  // Ends the request early (the client went away); a no-op once done.
  void abort();

  int64_t output_tokens() const { return output_tokens_; }
  // -1 until the first token.
  double ttft_ms() const { return ttft_ms_; }

 private:
  struct Timed {
    engine::TokenEvent event;
    Clock::time_point at;
  };
  struct Queue {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Timed> events;
  };

  Timed wait();
  // The decoded text of `token` through the stop strings.
  Expected<std::string> text_of(int32_t token);
  // An event's logprobs with its tokens' bytes; `text_offset` counts the characters before it.
  LogprobsEntry named(int32_t token, const engine::TokenLogprobs& logprobs) const;

  engine::Engine& engine_;
  const tokenizer::Tokenizer& tokenizer_;
  tokenizer::IncrementalDecoder decoder_;
  StopMatcher stops_;
  ServerMetrics& metrics_;
  Clock::time_point arrival_, last_token_;
  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  engine::RequestId id_ = -1;
  int64_t output_tokens_ = 0;
  int64_t decoded_chars_ = 0;  // characters the decoder has returned, before the stop strings cut
  double ttft_ms_ = -1;
  bool done_ = false;
};

}  // namespace evt::server
