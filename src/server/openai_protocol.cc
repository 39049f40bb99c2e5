#include "server/openai_protocol.h"

#include <fmt/format.h>

#include <limits>

#include "tokenizer/utf8.h"

namespace evt::server {

using json = nlohmann::json;

namespace {

// Thrown by the field readers below and caught by parse_request(), so that each field is one
// line there.
struct FieldError {
  ApiError error;
};

[[noreturn]] void bad_field(const std::string& param, const std::string& message) {
  throw FieldError{{.status = 400, .message = message, .param = param}};
}

// A field that is absent or null reads as unset.
const json* field(const json& body, const std::string& name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> read_int(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) bad_field(name, fmt::format("'{}' must be an integer, got {}", name, v->dump()));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    bad_field(name, fmt::format("'{}' is out of range: {}", name, v->dump()));
  }
  return v->get<int64_t>();
}

std::optional<float> read_number(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_field(name, fmt::format("'{}' must be a number, got {}", name, v->dump()));
  return static_cast<float>(v->get<double>());
}

std::optional<bool> read_bool(const json& body, const std::string& name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_field(name, fmt::format("'{}' must be a boolean, got {}", name, v->dump()));
  return v->get<bool>();
}

std::string read_string(const json& v, const std::string& name) {
  if (!v.is_string()) bad_field(name, fmt::format("'{}' must be a string, got {}", name, v.dump()));
  return v.get<std::string>();
}

std::variant<std::string, std::vector<int32_t>> read_prompt(const json& body) {
  const json* v = field(body, "prompt");
  if (!v) bad_field("prompt", "'prompt' is required");
  if (v->is_string()) return v->get<std::string>();
  // A list of one string is what many clients send for a single prompt.
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) return (*v)[0].get<std::string>();
  if (v->is_array() && !v->empty() && (*v)[0].is_number()) {
    std::vector<int32_t> ids;
    for (const json& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        bad_field("prompt", fmt::format("'prompt' token ids must be non-negative integers, got {}", id.dump()));
      }
      ids.push_back(id.get<int32_t>());
    }
    return ids;
  }
  bad_field("prompt", "'prompt' must be a string, a list of one string or a list of token ids (one prompt per request)");
}

// Content is a string, or a list of text parts joined.
std::string read_content(const json& message, const std::string& param) {
  const json* v = field(message, "content");
  if (!v) bad_field(param, fmt::format("'{}.content' is required", param));
  if (v->is_string()) return v->get<std::string>();
  if (!v->is_array()) bad_field(param, fmt::format("'{}.content' must be a string or a list of text parts", param));
  std::string text;
  for (const json& part : *v) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      bad_field(param, fmt::format("'{}.content' parts must be {{\"type\": \"text\", \"text\": ...}}", param));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<tokenizer::ChatMessage> read_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) bad_field("messages", "'messages' is required");
  if (!v->is_array() || v->empty()) bad_field("messages", "'messages' must be a non-empty list");
  std::vector<tokenizer::ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad_field(param, fmt::format("'{}' must be an object", param));
    const json* role = field(m, "role");
    if (!role) bad_field(param, fmt::format("'{}.role' is required", param));
    tokenizer::ChatMessage msg{.role = read_string(*role, param + ".role"), .content = read_content(m, param)};
    if (const json* r = field(m, "reasoning_content")) msg.reasoning_content = read_string(*r, param + ".reasoning_content");
    out.push_back(std::move(msg));
  }
  return out;
}

std::vector<std::string> read_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) stops.push_back(v->get<std::string>());
  else if (v->is_array()) {
    for (const json& s : *v) stops.push_back(read_string(s, "stop"));
  } else {
    bad_field("stop", "'stop' must be a string or a list of strings");
  }
  constexpr size_t kMaxStops = 16;
  if (stops.size() > kMaxStops) bad_field("stop", fmt::format("'stop' may hold at most {} strings", kMaxStops));
  for (const std::string& s : stops) {
    if (s.empty()) bad_field("stop", "'stop' strings must not be empty");
  }
  return stops;
}

// Fields this server does not implement: rejected rather than ignored, so that a client never
// gets output it did not ask for.
void reject_unsupported(const json& body) {
  if (const auto n = read_int(body, "n"); n && *n != 1) bad_field("n", fmt::format("only n=1 is supported, got {}", *n));
  if (const auto b = read_int(body, "best_of"); b && *b != 1) bad_field("best_of", "only best_of=1 is supported");
  if (read_bool(body, "echo").value_or(false)) bad_field("echo", "'echo' is not supported");
  for (const char* name : {"tools", "tool_choice", "response_format"}) {
    if (field(body, name)) bad_field(name, fmt::format("'{}' is not supported", name));
  }
}

engine::SamplingParams read_sampling(const json& body) {
  engine::SamplingParams p;
  p.temperature = read_number(body, "temperature").value_or(1.0f);
  p.top_p = read_number(body, "top_p").value_or(1.0f);
  p.min_p = read_number(body, "min_p").value_or(0.0f);
  p.presence_penalty = read_number(body, "presence_penalty").value_or(0.0f);
  p.frequency_penalty = read_number(body, "frequency_penalty").value_or(0.0f);
  if (const auto k = read_int(body, "top_k")) {
    // -1 is vLLM's "off"; the engine's is 0.
    if (*k < -1 || *k > std::numeric_limits<int32_t>::max()) bad_field("top_k", fmt::format("'top_k' must be -1, 0 or positive, got {}", *k));
    p.top_k = *k == -1 ? 0 : static_cast<int32_t>(*k);
  }
  if (const auto seed = read_int(body, "seed")) p.seed = static_cast<uint64_t>(*seed);
  p.ignore_eos = read_bool(body, "ignore_eos").value_or(false);
  return p;
}

std::optional<int32_t> read_top_count(const json& body, const std::string& name) {
  const std::optional<int64_t> n = read_int(body, name);
  if (n && (*n < 0 || *n > engine::kMaxLogprobs)) {
    bad_field(name, fmt::format("'{}' must be in [0, {}], got {}", name, engine::kMaxLogprobs, *n));
  }
  return n ? std::optional<int32_t>(static_cast<int32_t>(*n)) : std::nullopt;
}

// Completions: "logprobs": N alternatives. Chat: "logprobs": true, with "top_logprobs": N.
std::optional<int32_t> read_logprobs(const json& body, Endpoint endpoint) {
  if (endpoint == Endpoint::kCompletions) return read_top_count(body, "logprobs");
  const bool wanted = read_bool(body, "logprobs").value_or(false);
  const std::optional<int32_t> top = read_top_count(body, "top_logprobs");
  if (top && !wanted) bad_field("top_logprobs", "'top_logprobs' requires \"logprobs\": true");
  return wanted ? std::optional<int32_t>(top.value_or(0)) : std::nullopt;
}

GenerationRequest parse_fields(const json& body, Endpoint endpoint) {
  if (!body.is_object()) bad_field("", "the request body must be a JSON object");
  GenerationRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(body, "model")) r.model = read_string(*m, "model");
  reject_unsupported(body);
  if (endpoint == Endpoint::kChat) {
    r.messages = read_messages(body);
    r.max_tokens = read_int(body, "max_completion_tokens");
    if (!r.max_tokens) r.max_tokens = read_int(body, "max_tokens");
  } else {
    r.prompt = read_prompt(body);
    r.max_tokens = read_int(body, "max_tokens");
  }
  r.sampling = read_sampling(body);
  r.sampling.logprobs = read_logprobs(body, endpoint);
  r.stop = read_stop(body);
  r.stream = read_bool(body, "stream").value_or(false);
  if (const json* o = field(body, "stream_options")) {
    if (!o->is_object()) bad_field("stream_options", "'stream_options' must be an object");
    r.include_usage = read_bool(*o, "include_usage").value_or(false);
  }
  return r;
}

json choice_base(const std::optional<std::vector<LogprobsEntry>>& logprobs, Endpoint endpoint) {
  return {{"index", 0}, {"logprobs", logprobs ? logprobs_json(endpoint, *logprobs) : json(nullptr)}};
}

// JSON strings must be valid UTF-8; a token may be part of a character.
std::string token_text(const std::string& bytes) {
  std::string text;
  tokenizer::append_lossy_utf8(text, bytes);
  return text;
}

json chat_token_json(const TokenLogprob& t) {
  json bytes = json::array();
  for (const char c : t.token) bytes.push_back(static_cast<unsigned char>(c));
  return {{"token", token_text(t.token)}, {"logprob", t.logprob}, {"bytes", bytes}};
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json header_json(const ResponseHeader& h, bool chunk) {
  const char* object = h.endpoint == Endpoint::kChat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                     : "text_completion";
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiError rejection_error(const engine::Submission& s) {
  switch (s.rejection) {
    case engine::Rejection::kBusy:
      return {.status = 429, .message = s.error, .type = "rate_limit_error", .code = "server_busy"};
    case engine::Rejection::kTooLong:
      return {.status = 400, .message = s.error, .code = "context_length_exceeded"};
    default:
      return {.status = 400, .message = s.error};
  }
}

std::string_view endpoint_path(Endpoint e) {
  return e == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

std::variant<GenerationRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ApiError{.status = 400, .message = "the request body is not valid JSON"};
  try {
    return parse_fields(j, endpoint);
  } catch (const FieldError& e) {
    return e.error;
  }
}

json logprobs_json(Endpoint e, const std::vector<LogprobsEntry>& entries) {
  if (e == Endpoint::kChat) {
    json content = json::array();
    for (const LogprobsEntry& entry : entries) {
      json item = chat_token_json(entry.chosen);
      item["top_logprobs"] = json::array();
      for (const TokenLogprob& t : entry.top) item["top_logprobs"].push_back(chat_token_json(t));
      content.push_back(std::move(item));
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const LogprobsEntry& entry : entries) {
    tokens.push_back(token_text(entry.chosen.token));
    token_logprobs.push_back(entry.chosen.logprob);
    json top = json::object();
    // Tokens whose texts are equal (parts of characters, all U+FFFD) share a key: the most likely stays.
    for (const TokenLogprob& t : entry.top) top.emplace(token_text(t.token), t.logprob);
    top.emplace(token_text(entry.chosen.token), entry.chosen.logprob);
    top_logprobs.push_back(std::move(top));
    offsets.push_back(entry.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

json completion_body(const ResponseHeader& h, const std::string& text, std::string_view finish_reason,
                     const Usage& usage, const std::optional<std::vector<LogprobsEntry>>& logprobs) {
  json choice = choice_base(logprobs, h.endpoint);
  choice["finish_reason"] = finish_reason;
  if (h.endpoint == Endpoint::kChat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  json j = header_json(h, false);
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return j;
}

json chunk_body(const ResponseHeader& h, const std::string& text, std::optional<std::string_view> finish_reason,
                bool first, const std::optional<std::vector<LogprobsEntry>>& logprobs) {
  json choice = choice_base(logprobs, h.endpoint);
  choice["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
  if (h.endpoint == Endpoint::kChat) {
    choice["delta"] = {{"content", text}};
    if (first) choice["delta"]["role"] = "assistant";
  } else {
    choice["text"] = text;
  }
  json j = header_json(h, true);
  j["choices"] = json::array({choice});
  return j;
}

json usage_chunk_body(const ResponseHeader& h, const Usage& usage) {
  json j = header_json(h, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

json models_body(const std::string& model, int64_t created, int64_t max_model_len, int64_t vocab_size) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "eventide"},
                                 {"max_model_len", max_model_len},
                                 {"vocab_size", vocab_size}}})}};
}

std::string sse_event(const json& j) { return "data: " + j.dump() + "\n\n"; }

}  // namespace evt::server
