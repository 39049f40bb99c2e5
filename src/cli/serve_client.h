#pragma once
// The client side of `eventide bench serve`: one streamed request to an OpenAI-compatible
// server, timed as vLLM's benchmark client times it, and the model a server serves.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace evt::cli {

// What one request saw. Times in seconds from just before the request was sent.
struct StreamedResult {
  bool success = false;
  double ttft_s = 0;         // the first chunk that carries choices
  double latency_s = 0;      // the last chunk that carries choices (vLLM's end-to-end latency)
  std::vector<double> itl_s;  // between consecutive chunks that carry choices
  // From the final usage chunk; unset when the server sent none.
  std::optional<int64_t> prompt_tokens, output_tokens;
  int64_t chunks = 0;  // chunks that carried choices
  std::string error;   // why it failed
};

// POSTs `body` (which asks for "stream": true) to `path` of `url` (http://host:port) and reads
// the server-sent events to the end; never throws. `timeout_s` bounds each read.
StreamedResult post_streamed(const std::string& url, const std::string& path, const nlohmann::json& body,
                             int timeout_s);

struct ServedModelInfo {
  std::string id;
  std::optional<int64_t> max_model_len, vocab_size;  // Eventide and vLLM report the first, Eventide the second
};

// The first model of GET /v1/models.
Expected<ServedModelInfo> served_model(const std::string& url, int timeout_s);

}  // namespace evt::cli
