#include "server/server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>

#include "server/connection_watch.h"

namespace evt::server {

using json = nlohmann::json;

namespace {

constexpr const char* kRequestIdHeader = "X-Request-Id";

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(j.dump(), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

// What httplib itself answers (unknown route, oversized body, ...) as an OpenAI-style error.
ApiError http_error(int status) {
  switch (status) {
    case 404:
      return {.status = 404, .message = "no such endpoint", .code = "not_found"};
    case 413:
      return {.status = 413, .message = "the request body is too large", .code = "payload_too_large"};
    default:
      return {.status = status, .message = fmt::format("HTTP {}", status)};
  }
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Metric labels: the known paths, so that clients probing random URLs cannot grow the registry.
std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"}) {
    if (path == known) return path;
  }
  return "other";
}

std::atomic<int64_t> next_request = 0;

}  // namespace

Server::Server(ServedModel model, ServerOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      created_(unix_seconds()),
      http_(std::make_unique<httplib::Server>()) {
  http_->new_task_queue = [n = options_.http_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  // Keeps the listening socket, whose backlog bind() raises. SO_REUSEADDR as httplib's default.
  http_->set_socket_options([this](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd_ = sock;
  });
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::kCompletions);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::kChat);
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_body(model_.name, created_, model_.engine->max_context(), model_.tokenizer->vocab_size()));
  });
  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(model_.engine->metrics()), "text/plain; version=0.0.4");
  });
  // Called for every status >= 400; only responses httplib made itself have no body yet.
  http_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) send_error(res, http_error(res.status));
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, {.status = 500, .message = what, .type = "server_error"});
  });
  // Counts every response before its first byte goes out, so that a client that has it finds it
  // in /metrics (the logger runs only after the response is written).
  http_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
  });
  // Logs every response; generation requests log their own line with tokens and times.
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (!res.has_header(kRequestIdHeader)) {
      log_request({.id = "-", .endpoint = req.path, .status = res.status, .arrival = Clock::now()});
    }
  });
}

Server::~Server() { stop(); }

Expected<int> Server::bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) return error("cannot listen on {}:{}", options_.host, options_.port);
  // httplib listens with a backlog of 5: a burst of clients connecting at once (while the
  // accept thread waits for a core) overflows it and some connections are lost. Linux lets
  // listen() be called again to raise it (the kernel caps it at net.core.somaxconn).
  constexpr int kListenBacklog = 1024;
  if (::listen(listen_fd_, kListenBacklog) != 0) return error("cannot listen on {}:{}", options_.host, port);
  return port;
}

void Server::listen() { http_->listen_after_bind(); }

void Server::stop() { http_->stop(); }

std::variant<std::vector<int32_t>, ApiError> Server::prompt_tokens(const GenerationRequest& r) const {
  if (r.endpoint == Endpoint::kChat) {
    if (!model_.chat_template) {
      return ApiError{.status = 400, .message = fmt::format("model {} has no chat template", model_.name)};
    }
    Expected<std::string> text = model_.chat_template->render(r.messages, {.add_generation_prompt = true});
    if (!text.ok()) return ApiError{.status = 400, .message = text.status().message(), .param = "messages"};
    return model_.tokenizer->encode(*text);
  }
  if (const auto* ids = std::get_if<std::vector<int32_t>>(&r.prompt)) return *ids;
  return model_.tokenizer->encode(std::get<std::string>(r.prompt), /*add_special_tokens=*/true);
}

void Server::handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::kChat;
  LogLine log{.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_request++),
              .endpoint = std::string(endpoint_path(endpoint)),
              .arrival = Clock::now()};
  res.set_header(kRequestIdHeader, log.id);
  const auto reject = [&](const ApiError& e) {
    send_error(res, e);
    log.status = e.status;
    log.outcome = "rejected";
    log_request(log);
  };

  auto parsed = parse_request(req.body, endpoint);
  if (const auto* e = std::get_if<ApiError>(&parsed)) return reject(*e);
  GenerationRequest& r = std::get<GenerationRequest>(parsed);
  if (!r.model.empty() && r.model != model_.name) {
    return reject({.status = 404,
                   .message = fmt::format("the model '{}' does not exist; this server serves '{}'", r.model, model_.name),
                   .param = "model",
                   .code = "model_not_found"});
  }
  auto prompt = prompt_tokens(r);
  if (const auto* e = std::get_if<ApiError>(&prompt)) return reject(*e);
  engine::Request er{.prompt = std::move(std::get<std::vector<int32_t>>(prompt)), .sampling = r.sampling};
  log.prompt_tokens = static_cast<int64_t>(er.prompt.size());
  // Chat defaults to the rest of the context, as OpenAI's does; completions to OpenAI's 16.
  const int64_t room = std::max<int64_t>(1, model_.engine->max_context() - log.prompt_tokens);
  er.sampling.max_tokens = r.max_tokens.value_or(chat ? room : 16);
  if (!r.sampling.ignore_eos) er.sampling.stop_token_ids = model_.eos_token_ids;

  auto gen = std::make_shared<Generation>(*model_.engine, *model_.tokenizer, r.stop, metrics_, log.arrival);
  const engine::Submission s = model_.engine->submit(std::move(er), gen->callback());
  if (!s.accepted()) return reject(rejection_error(s));
  gen->started(s.id);
  const ResponseHeader header{.endpoint = endpoint, .id = log.id, .model = model_.name, .created = unix_seconds()};
  const bool logprobs = r.sampling.logprobs.has_value();
  if (r.stream) return respond_streamed(res, gen, header, logprobs, r.include_usage, std::move(log));
  respond_whole(req, res, *gen, header, logprobs, std::move(log));
}

void Server::respond_whole(const httplib::Request& req, httplib::Response& res, Generation& gen,
                           const ResponseHeader& header, bool logprobs, LogLine log) {
  // Nothing is written until the end, so a client that hangs up is noticed only by watching its
  // socket; a request generating hundreds of tokens would otherwise hold its KV pages to the end.
  constexpr auto kWatchInterval = std::chrono::milliseconds(50);
  const ConnectionWatch watch(req);
  std::string text;
  std::optional<std::vector<LogprobsEntry>> entries;
  if (logprobs) entries.emplace();
  Generation::Piece p;
  bool disconnected = false;
  auto next_watch = Clock::now() + kWatchInterval;
  while (!gen.done()) {
    if (Clock::now() >= next_watch) {
      if (watch.closed()) {
        gen.abort();
        disconnected = true;
        break;
      }
      next_watch = Clock::now() + kWatchInterval;
    }
    if (!gen.ready_within(kWatchInterval)) continue;
    p = gen.next();
    text += p.text;
    if (p.logprobs) entries->push_back(*std::move(p.logprobs));
  }
  log.output_tokens = gen.output_tokens();
  log.ttft_ms = gen.ttft_ms();
  if (disconnected) {
    // Nobody reads this; 499 (nginx's "client closed request") keeps it apart in the metrics.
    send_error(res, {.status = 499, .message = "the client disconnected", .code = "client_disconnected"});
    log.status = 499;
    log.outcome = "disconnected";
  } else if (!p.error.empty()) {
    send_error(res, {.status = 500, .message = p.error, .type = "server_error"});
    log.status = 500;
    log.outcome = "error";
  } else {
    send_json(res, 200, completion_body(header, text, *p.finish_reason, {log.prompt_tokens, log.output_tokens}, entries));
    log.outcome = *p.finish_reason;
  }
  log_request(log);
}

void Server::respond_streamed(httplib::Response& res, std::shared_ptr<Generation> gen, const ResponseHeader& header,
                              bool logprobs, bool include_usage, LogLine log) {
  res.set_header("Cache-Control", "no-cache");
  auto outcome = std::make_shared<std::string>("disconnected");
  res.set_chunked_content_provider(
      "text/event-stream",
      [gen, header, outcome, logprobs, include_usage, prompt = log.prompt_tokens](size_t, httplib::DataSink& sink) {
        bool first = true;
        while (!gen->done()) {
          Generation::Piece p = gen->next();
          std::string event;
          if (!p.error.empty()) {
            event = sse_event(error_body({.status = 500, .message = p.error, .type = "server_error"}));
            *outcome = "error";
          } else if (first || !p.text.empty() || p.finish_reason || p.logprobs) {
            // With logprobs, every token gets a chunk, even one whose text is still held back.
            std::optional<std::vector<LogprobsEntry>> entries;
            if (logprobs) {
              entries.emplace();
              if (p.logprobs) entries->push_back(*std::move(p.logprobs));
            }
            event = sse_event(chunk_body(header, p.text, p.finish_reason, first, entries));
            first = false;
            if (p.finish_reason) *outcome = *p.finish_reason;
          }
          if (!event.empty() && !sink.write(event.data(), event.size())) {
            *outcome = "disconnected";
            return false;  // the releaser aborts the request
          }
        }
        std::string tail;
        if (include_usage) tail = sse_event(usage_chunk_body(header, {prompt, gen->output_tokens()}));
        tail += kSseDone;
        if (!sink.write(tail.data(), tail.size())) return false;
        sink.done();
        return true;
      },
      [this, gen, outcome, log](bool success) mutable {
        if (!success) gen->abort();
        log.output_tokens = gen->output_tokens();
        log.ttft_ms = gen->ttft_ms();
        log.outcome = success ? *outcome : "disconnected";
        log_request(log);
      });
}

void Server::log_request(const LogLine& l) {
  if (!l.outcome.empty()) metrics_.count_outcome(l.outcome);
  if (!options_.log_requests) return;
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - l.arrival).count();
  fmt::print(stderr, "request id={} endpoint={} status={} outcome={} prompt_tokens={} output_tokens={} ttft_ms={:.1f} total_ms={:.1f}\n",
             l.id, l.endpoint, l.status, l.outcome.empty() ? "-" : l.outcome, l.prompt_tokens, l.output_tokens,
             l.ttft_ms, total_ms);
}

}  // namespace evt::server
