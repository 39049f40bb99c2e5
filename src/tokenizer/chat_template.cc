#include "tokenizer/chat_template.h"

#include <unicode/utf8.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace evt::tokenizer {
namespace {

using nlohmann::json;

// --- The Python string methods the templates call, on UTF-8 bytes.

std::string_view lstrip_newlines(std::string_view text) {
  const std::size_t start = text.find_first_not_of('\n');
  return start == std::string_view::npos ? std::string_view() : text.substr(start);
}

std::string_view rstrip_newlines(std::string_view text) {
  const std::size_t last = text.find_last_not_of('\n');
  return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

std::string_view strip_newlines(std::string_view text) { return lstrip_newlines(rstrip_newlines(text)); }

// Python's str.isspace(), which Jinja's trim filter (str.strip()) goes by.
bool is_python_space(UChar32 c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Jinja's trim: Unicode white space off both ends. Ill-formed bytes count as text.
std::string_view python_strip(std::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const auto size = static_cast<int32_t>(text.size());
  int32_t start = -1;
  int32_t end = 0;
  for (int32_t i = 0; i < size;) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(bytes, i, size, c);
    if (c >= 0 && is_python_space(c)) continue;
    if (start < 0) start = at;
    end = i;
  }
  return start < 0 ? std::string_view() : text.substr(start, end - start);
}

// --- Qwen3.

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// The index of the last user message that is a query rather than tool output wrapped in
// <tool_response> (the template's ns.last_query_index); the last index when there is none.
std::size_t last_query_index(std::span<const ChatMessage> messages) {
  for (std::size_t i = messages.size(); i-- > 0;) {
    const std::string_view content = messages[i].content;
    const bool tool_output = content.starts_with("<tool_response>") && content.ends_with("</tool_response>");
    if (messages[i].role == "user" && !tool_output) return i;
  }
  return messages.size() - 1;
}

struct AssistantTurn {
  std::string_view reasoning;
  std::string_view content;
};

// reasoning_content when given; else the template's split of content at </think>: the reasoning
// is what precedes the first </think> (after the last <think> there), the answer what follows
// the last one.
AssistantTurn split_reasoning(const ChatMessage& message) {
  const std::string_view content = message.content;
  if (message.reasoning_content) return {*message.reasoning_content, content};
  const std::size_t first_close = content.find(kThinkClose);
  if (first_close == std::string_view::npos) return {{}, content};
  std::string_view reasoning = rstrip_newlines(content.substr(0, first_close));
  const std::size_t open = reasoning.rfind(kThinkOpen);
  if (open != std::string_view::npos) reasoning.remove_prefix(open + kThinkOpen.size());
  const std::size_t last_close = content.rfind(kThinkClose);
  return {lstrip_newlines(reasoning), lstrip_newlines(content.substr(last_close + kThinkClose.size()))};
}

std::string render_qwen3(std::span<const ChatMessage> messages, const ChatOptions& options) {
  const std::size_t last_query = last_query_index(messages);
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    out += "<|im_start|>" + message.role + "\n";
    if (message.role != "assistant") {
      out.append(message.content);
    } else {
      const AssistantTurn turn = split_reasoning(message);
      // Reasoning survives only in the turns answering the last query; earlier turns lose it.
      // The last turn always gets a <think> block, an empty one if need be.
      const bool last = i + 1 == messages.size();
      if (i > last_query && (last || !turn.reasoning.empty())) {
        out += fmt::format("<think>\n{}\n</think>\n\n{}", strip_newlines(turn.reasoning),
                           lstrip_newlines(turn.content));
      } else {
        out.append(turn.content);
      }
    }
    out += "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

// --- Llama 3.

std::string llama_header(std::string_view role) {
  return fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n", role);
}

// strftime_now("%d %b %Y"), as transformers defines it for templates: the local date.
std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  return std::string(text, std::strftime(text, sizeof text, "%d %b %Y", &local));
}

// The template's date_string: the caller's, else 3.2's strftime_now, else 3.1's fixed date.
std::string llama_date(ChatTemplateKind kind, const ChatOptions& options) {
  if (options.date_string) return *options.date_string;
  return kind == ChatTemplateKind::kLlama32 ? today() : "26 Jul 2024";
}

// 3.1 and later open with a system block, whether or not the conversation has a system message:
// the knowledge cut-off, the date, then the message.
std::string llama_system_block(std::string_view system, const std::string& date) {
  return fmt::format("{}Cutting Knowledge Date: December 2023\nToday Date: {}\n\n{}<|eot_id|>",
                     llama_header("system"), date, system);
}

std::string render_llama(ChatTemplateKind kind, std::string_view bos_token, std::span<const ChatMessage> messages,
                         const ChatOptions& options) {
  std::string out(bos_token);
  if (kind != ChatTemplateKind::kLlama3) {
    std::string_view system;
    if (messages.front().role == "system") {
      system = python_strip(messages.front().content);
      messages = messages.subspan(1);
    }
    out += llama_system_block(system, llama_date(kind, options));
  }
  for (const ChatMessage& message : messages) {
    out += llama_header(message.role);
    out.append(python_strip(message.content));
    out += "<|eot_id|>";
  }
  if (options.add_generation_prompt) out += llama_header("assistant");
  return out;
}

// --- Loading.

Status check_messages(std::span<const ChatMessage> messages) {
  if (messages.empty()) return error("the conversation has no messages");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "system" || role == "user" || role == "assistant") continue;
    if (role == "tool" || role == "ipython") {
      return error("messages[{}]: role \"{}\" is not supported (tools are out of scope)", i, role);
    }
    return error("messages[{}]: unknown role \"{}\" (expected system, user or assistant)", i, role);
  }
  return {};
}

Expected<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return error("{}: cannot open", path.string());
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// A special token as tokenizer_config.json writes it: a string, {"content": ...}, or null/absent,
// which the templates render as an empty string.
std::string special_token(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  const auto content = it->is_object() ? it->find("content") : it->end();
  if (content != it->end() && content->is_string()) return content->get<std::string>();
  return "";
}

// "chat_template": a string, or a list of {"name", "template"} of which the model's own is "default".
Expected<std::string> config_template(const json& config) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return error("no \"chat_template\" (nor a chat_template.jinja beside it)");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const json& entry : *it) {
      if (!entry.is_object() || entry.value("name", "") != "default") continue;
      const auto jinja = entry.find("template");
      if (jinja != entry.end() && jinja->is_string()) return jinja->get<std::string>();
    }
  }
  return error("\"chat_template\" is neither a string nor a list with a \"default\" template");
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::load(const std::filesystem::path& tokenizer_config_json) {
  const std::string file = tokenizer_config_json.string();
  EVT_ASSIGN_OR_RETURN(const std::string text, read_file(tokenizer_config_json));
  json config;
  try {
    config = json::parse(text);
  } catch (const json::parse_error& e) {
    return error("{}: not valid JSON: {}", file, e.what());
  }
  if (!config.is_object()) return error("{}: not a JSON object", file);
  std::string bos_token = special_token(config, "bos_token");
  const std::filesystem::path jinja_file = tokenizer_config_json.parent_path() / "chat_template.jinja";
  if (std::filesystem::exists(jinja_file)) {
    EVT_ASSIGN_OR_RETURN(const std::string jinja, read_file(jinja_file));
    return recognize(jinja, std::move(bos_token), jinja_file.string());
  }
  Expected<std::string> jinja = config_template(config);
  if (!jinja.ok()) return jinja.status().with_context(file);
  return recognize(*jinja, std::move(bos_token), file);
}

Expected<ChatTemplate> ChatTemplate::recognize(std::string_view jinja, std::string bos_token, std::string_view source) {
  const auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (!has("enable_thinking")) {
      return error("{}: a ChatML chat template without Qwen3's enable_thinking switch (Qwen2.5's or "
                   "Qwen3-Instruct-2507's?); only the Qwen3 and Llama 3 templates are supported", source);
    }
    return ChatTemplate(ChatTemplateKind::kQwen3, std::move(bos_token));
  }
  if (has("<|start_header_id|>")) {
    if (!has("Cutting Knowledge Date")) return ChatTemplate(ChatTemplateKind::kLlama3, std::move(bos_token));
    // 3.2 dates its system block today, 3.1 with a fixed date.
    const bool dated_today = has("strftime_now");
    return ChatTemplate(dated_today ? ChatTemplateKind::kLlama32 : ChatTemplateKind::kLlama31, std::move(bos_token));
  }
  return error("{}: unrecognized chat template (neither Qwen3's ChatML with <|im_start|> nor Llama 3's "
               "with <|start_header_id|>)", source);
}

Expected<std::string> ChatTemplate::render(std::span<const ChatMessage> messages, const ChatOptions& options) const {
  EVT_RETURN_IF_ERROR(check_messages(messages));
  if (kind_ == ChatTemplateKind::kQwen3) return render_qwen3(messages, options);
  return render_llama(kind_, bos_token_, messages, options);
}

}  // namespace evt::tokenizer
