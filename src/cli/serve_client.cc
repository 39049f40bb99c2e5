#include "cli/serve_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>

namespace evt::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

httplib::Client client(const std::string& url, int timeout_s) {
  httplib::Client c(url);
  c.set_connection_timeout(std::chrono::seconds(timeout_s));
  c.set_read_timeout(std::chrono::seconds(timeout_s));
  c.set_write_timeout(std::chrono::seconds(timeout_s));
  return c;
}

// Takes each event's "data: ..." payload as it completes, as vLLM's client does.
class EventReader {
 public:
  explicit EventReader(StreamedResult& r, Clock::time_point start) : r_(r), start_(start) {}

  void feed(const char* data, size_t n) {
    buffer_.append(data, n);
    for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos; buffer_.erase(0, end + 2)) {
      const std::string event = buffer_.substr(0, end);
      if (event.rfind("data: ", 0) == 0) take(event.substr(6));
    }
  }
  bool done() const { return done_; }
  // What came that was not an event: the body of an error response.
  const std::string& rest() const { return buffer_; }

 private:
  void take(const std::string& payload) {
    if (payload == "[DONE]") {
      done_ = true;
      return;
    }
    const json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      r_.error = "a server-sent event that is not JSON: " + payload.substr(0, 200);
      return;
    }
    if (j.contains("error")) {
      r_.error = "the server sent an error event: " + j["error"].dump();
      return;
    }
    const double now_s = std::chrono::duration<double>(Clock::now() - start_).count();
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      if (r_.chunks == 0) r_.ttft_s = now_s;
      else r_.itl_s.push_back(now_s - r_.latency_s);
      r_.latency_s = now_s;
      ++r_.chunks;
    } else if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) r_.prompt_tokens = u["prompt_tokens"];
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
        r_.output_tokens = u["completion_tokens"];
      }
    }
  }

  StreamedResult& r_;
  Clock::time_point start_;
  std::string buffer_;
  bool done_ = false;
};

}  // namespace

StreamedResult post_streamed(const std::string& url, const std::string& path, const json& body, int timeout_s) {
  StreamedResult r;
  httplib::Client c = client(url, timeout_s);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  const Clock::time_point start = Clock::now();
  EventReader events(r, start);
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    events.feed(data, n);
    return r.error.empty();
  };
  const httplib::Result res = c.send(req);
  if (!r.error.empty()) return r;
  if (!res) {
    r.error = fmt::format("{}{}: {}", url, path, httplib::to_string(res.error()));
  } else if (res->status != 200) {
    r.error = fmt::format("HTTP {}: {}", res->status, events.rest().substr(0, 300));
  } else if (r.chunks == 0) {
    r.error = "the stream ended before any token";  // vLLM: "Never received a valid chunk"
  } else if (!events.done()) {
    r.error = "the stream ended without data: [DONE]";
  } else {
    r.success = true;
  }
  return r;
}

Expected<ServedModelInfo> served_model(const std::string& url, int timeout_s) {
  httplib::Client c = client(url, timeout_s);
  const httplib::Result res = c.Get("/v1/models");
  if (!res) return error("GET {}/v1/models: {}", url, httplib::to_string(res.error()));
  if (res->status != 200) return error("GET {}/v1/models: HTTP {}", url, res->status);
  const json j = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return error("GET {}/v1/models: no model in {}", url, res->body.substr(0, 200));
  }
  const json& m = j["data"][0];
  ServedModelInfo info{.id = m["id"], .max_model_len = {}, .vocab_size = {}};
  if (m.contains("max_model_len") && m["max_model_len"].is_number_integer()) info.max_model_len = m["max_model_len"];
  if (m.contains("vocab_size") && m["vocab_size"].is_number_integer()) info.vocab_size = m["vocab_size"];
  return info;
}

}  // namespace evt::cli
