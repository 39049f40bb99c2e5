#pragma once
// The serving engine: requests in, tokens streamed out, over one Decoder (CPU or CUDA). Each
// step the scheduler (scheduler.h) picks the sequences and chunks, the whole ragged batch of
// decodes and prefill chunks runs as one step of the decode graph (one megakernel launch on the
// GPU), and the graph's sample task picks each sequence's next token.
//
// Thread safety: submit(), abort() and metrics() may be called from any thread. Steps run on
// the engine's own thread after start(), or on the caller's thread through step() and
// run_until_idle() (offline benchmarks, tests). Callbacks run on the stepping thread with no
// engine lock held, so they may call abort() or submit(); they should return quickly, as the
// next step waits for them.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/scheduler.h"
#include "model/decoder.h"
#include "model/kv_pages.h"

namespace evt::engine {

struct EngineOptions {
  SchedulerOptions scheduler;
  int64_t max_waiting = 4096;  // queued requests beyond this are rejected as busy
  uint64_t seed = 0;           // draws the seeds of requests that bring none
};

struct Request {
  std::vector<int32_t> prompt;  // token ids
  SamplingParams sampling;
};

// Why submit() turned a request away; a server maps these to HTTP 400, 400 and 429/503.
enum class Rejection { kNone, kInvalid, kTooLong, kBusy };

struct Submission {
  RequestId id = -1;  // >= 0 when accepted
  Rejection rejection = Rejection::kNone;
  std::string error;  // names the field at fault
  bool accepted() const { return id >= 0; }
};

struct EngineMetrics {
  int64_t running = 0, waiting = 0;
  int64_t kv_pages_used = 0, kv_pages_total = 0;
  int64_t steps = 0, preemptions = 0;
  int64_t requests_finished = 0, prompt_tokens = 0, generated_tokens = 0;
  int64_t batch_shapes = 0;  // distinct (tokens, sequences) pairs the steps had
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> create(std::unique_ptr<model::Decoder> decoder, const EngineOptions& o);
  // Stops the loop and aborts whatever is still queued or running.
  ~Engine();

  // Validates and queues a request; `callback` then receives its tokens and its end.
  Submission submit(Request request, TokenCallback callback);
  // Ends a request (its callback gets kAbort and its pages go back); a no-op for unknown or
  // finished ids.
  void abort(RequestId id);

  // One scheduling round and one decoder step. Returns false when there was nothing to run,
  // and an error when the decoder failed (every request in flight then ends with kError).
  Expected<bool> step();
  Status run_until_idle();
  // Steps on a thread of the engine's own until the engine is destroyed.
  void start();

  EngineMetrics metrics() const;
  const model::Decoder& decoder() const { return *decoder_; }
  // The longest prompt plus max_tokens a request may have.
  int64_t max_context() const { return max_context_; }

 private:
  Engine(std::unique_ptr<model::Decoder> decoder, const EngineOptions& o);
  Status validate(const Request& r) const;
  // Takes the new requests and aborts posted since the last step.
  // An event and the callback it goes to, delivered after the step with no lock held.
  struct Outgoing {
    std::shared_ptr<const TokenCallback> callback;
    TokenEvent event;
  };
  void drain_inbox(std::vector<Outgoing>& out);
  void finish(RequestId id, FinishReason reason, const std::string& error, std::vector<Outgoing>& out);
  // Appends the sampled token, and ends the sequence if it stops here.
  void accept_token(Sequence& seq, int32_t token, std::optional<TokenLogprobs> logprobs, std::vector<Outgoing>& out);
  void fail_all(const std::string& error, std::vector<Outgoing>& out);
  // Copies the stepping thread's counters and the queues' sizes into metrics_.
  void publish(const Schedule* ran);
  void loop();

  std::unique_ptr<model::Decoder> decoder_;
  EngineOptions options_;
  int64_t max_context_ = 0;
  model::KvPages pool_;
  Scheduler scheduler_;  // the stepping thread's alone
  EngineMetrics counted_;  // the stepping thread's running totals, published after each step

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> inbox_;
  std::vector<RequestId> aborts_;
  RequestId next_id_ = 0;
  std::mt19937_64 seeds_;
  EngineMetrics metrics_;
  std::set<std::pair<int64_t, int64_t>> shapes_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace evt::engine
