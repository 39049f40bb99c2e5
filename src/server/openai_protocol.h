#pragma once
// The OpenAI HTTP API as pure functions: request bodies parsed and type-checked into what the
// engine needs, and response bodies built, with no sockets involved (server.h does the HTTP).
// Value ranges (temperature, top_p, max_tokens, ...) are checked by the engine at submit, which
// names the field; this layer checks presence and types, and what the engine cannot know (n,
// the logprobs fields' names, stop strings).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace evt::server {

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: none
  std::string code;   // empty: null
};
nlohmann::json error_body(const ApiError& e);
// The error for a request the engine turned away: 400 for kInvalid and kTooLong, 429 for kBusy.
ApiError rejection_error(const engine::Submission& s);

enum class Endpoint { kCompletions, kChat };
std::string_view endpoint_path(Endpoint e);

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // empty when the request names none
  // Completions: text, or token ids.
  std::variant<std::string, std::vector<int32_t>> prompt;
  std::vector<tokenizer::ChatMessage> messages;  // chat
  std::optional<int64_t> max_tokens;              // unset: the endpoint's default
  engine::SamplingParams sampling;                // max_tokens and stop ids are set by the server
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

// Parses a request body; on failure the error names the field.
std::variant<GenerationRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint);

// A token and its logprob, the token as the raw bytes the tokenizer gives it (possibly part of a
// UTF-8 character; responses show it as text with U+FFFD there, and chat also as its bytes).
struct TokenLogprob {
  std::string token;
  float logprob = 0;
};

// One generated token's logprobs as a response shows them.
struct LogprobsEntry {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the most likely tokens, most likely first
  int64_t text_offset = 0;        // characters of the generated text before this token's
};
// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, each top_logprobs
// entry a map that also holds the chosen token (OpenAI: "up to logprobs+1 elements"); chat:
// {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
nlohmann::json logprobs_json(Endpoint e, const std::vector<LogprobsEntry>& entries);

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// Fields every response and chunk of one request shares.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;
  std::string model;
  int64_t created = 0;  // Unix seconds
};

// `logprobs` unset: the choice's "logprobs" is null (the request asked for none).
nlohmann::json completion_body(const ResponseHeader& h, const std::string& text, std::string_view finish_reason,
                               const Usage& usage, const std::optional<std::vector<LogprobsEntry>>& logprobs);
// One streamed chunk: `text`, the logprobs of its tokens, and, on the last one, the finish
// reason. Chat's first chunk also carries the role.
nlohmann::json chunk_body(const ResponseHeader& h, const std::string& text,
                          std::optional<std::string_view> finish_reason, bool first,
                          const std::optional<std::vector<LogprobsEntry>>& logprobs);
// The chunk that stream_options.include_usage adds at the end: no choices, the usage.
nlohmann::json usage_chunk_body(const ResponseHeader& h, const Usage& usage);
// Besides OpenAI's fields, the model carries vLLM's max_model_len (prompt plus max_tokens at
// most) and vocab_size (one past the largest id the tokenizer names), which a benchmark client
// needs to make prompts of token ids.
nlohmann::json models_body(const std::string& model, int64_t created, int64_t max_model_len, int64_t vocab_size);

// A server-sent event carrying `j`.
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace evt::server
