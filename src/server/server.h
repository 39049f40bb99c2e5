#pragma once
// The OpenAI-compatible HTTP server over an Engine (cpp-httplib, one thread per connection from
// a pool): POST /v1/completions and /v1/chat/completions (whole or streamed as server-sent
// events), GET /v1/models, /health and /metrics. Bad requests get an OpenAI-style error and
// the server goes on; a client that disconnects, streaming or waiting for a whole response, has
// its engine request aborted.
// Each request logs one line: id, endpoint, status, tokens, TTFT and total time.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace evt::server {

// What the server serves; the engine must be running (Engine::start()) and outlive the server.
struct ServedModel {
  std::string name;  // the id of GET /v1/models; requests naming another model get 404
  engine::Engine* engine = nullptr;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::optional<tokenizer::ChatTemplate> chat_template;  // unset: chat requests get 400
  std::vector<int32_t> eos_token_ids;                    // end every request
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  // Connections served at once (each streaming client holds one thread).
  int http_threads = 128;
  size_t max_body_bytes = 4 << 20;
  bool log_requests = true;
};

class Server {
 public:
  Server(ServedModel model, ServerOptions options);
  ~Server();

  // Binds the socket; returns the port (the one chosen when options.port is 0).
  Expected<int> bind();
  // Serves until stop(); call after bind().
  void listen();
  void stop();

 private:
  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  // The prompt's token ids: the rendered chat, or the completion prompt (text or ids).
  std::variant<std::vector<int32_t>, ApiError> prompt_tokens(const GenerationRequest& r) const;
  struct LogLine {
    std::string id, endpoint;
    int status = 200;
    std::string outcome;  // stop, length, error, disconnected, rejected
    int64_t prompt_tokens = 0, output_tokens = 0;
    double ttft_ms = -1;
    Clock::time_point arrival;
  };
  void log_request(const LogLine& l);
  // The response to an accepted request, whole or as server-sent events.
  void respond_whole(const httplib::Request& req, httplib::Response& res, Generation& gen,
                     const ResponseHeader& header, bool logprobs, LogLine log);
  void respond_streamed(httplib::Response& res, std::shared_ptr<Generation> gen, const ResponseHeader& header,
                        bool logprobs, bool include_usage, LogLine log);

  ServedModel model_;
  ServerOptions options_;
  ServerMetrics metrics_;
  int64_t created_;  // Unix seconds, for /v1/models
  int listen_fd_ = -1;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace evt::server
