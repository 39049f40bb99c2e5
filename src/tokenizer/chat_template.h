#pragma once
// Chat templates: a conversation rendered to prompt text exactly as Hugging Face transformers'
// apply_chat_template(messages, tokenize=False) renders it with the model's own Jinja template.
//
// This is not a Jinja interpreter. Each supported template is a small C++ renderer, and the model's
// template text is only used to tell which one applies (by markers that the official templates
// contain; a modified template is rendered as the official one of its family):
//
//   Qwen3      "<|im_start|>" and "enable_thinking": the ChatML template with the thinking switch
//              that Qwen/Qwen3-8B ships (and the other Qwen3 hybrid-thinking models).
//   Llama 3    "<|start_header_id|>" without a system block: Meta-Llama-3-8B-Instruct's.
//   Llama 3.1  "<|start_header_id|>" and "Cutting Knowledge Date": Llama-3.1-8B-Instruct's (3.3
//              ships the same); its system block is dated 26 Jul 2024.
//   Llama 3.2  as 3.1, but the template dates the system block today (strftime_now).
//
// Other templates (Qwen2.5's ChatML, Qwen3-Instruct-2507's, Mistral's, ...) are an error. The
// template texts this is tested against are in tests/tokenizer/data/chat_templates/.
//
// Out of scope: tools and tool calls (a "tools" list, assistant tool_calls, role "tool" or
// "ipython", which are rejected), content given as a list of parts (text only), and
// continue_final_message.

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "util/status.h"

namespace evt::tokenizer {

enum class ChatTemplateKind { kQwen3, kLlama3, kLlama31, kLlama32 };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
  // Qwen3: an assistant turn's reasoning given apart from its answer (as OpenAI-style APIs return
  // it). Without it, Qwen3 splits a <think>...</think> block off the content. Llama ignores it.
  std::optional<std::string> reasoning_content;
};

struct ChatOptions {
  // End with the header of the assistant turn the model is to write.
  bool add_generation_prompt = false;
  // Qwen3: false pre-fills an empty <think> block after the generation prompt, so that the model
  // answers without reasoning. Ignored by Llama.
  bool enable_thinking = true;
  // Llama 3.1 and 3.2: the "Today Date" of the system block, e.g. "26 Jul 2024" (the template's
  // date_string). Unset: 3.1 writes 26 Jul 2024, 3.2 today's local date, as transformers does.
  std::optional<std::string> date_string;
};

class ChatTemplate {
 public:
  // The template of a model: chat_template.jinja beside `tokenizer_config_json` when there is one
  // (transformers gives it priority), else the config's "chat_template" (a string, or the entry
  // named "default" of a list). bos_token comes from the config (Llama writes it).
  static Expected<ChatTemplate> load(const std::filesystem::path& tokenizer_config_json);
  // Tells which renderer `jinja` needs; `source` names where it came from, for the error.
  static Expected<ChatTemplate> recognize(std::string_view jinja, std::string bos_token, std::string_view source);

  ChatTemplateKind kind() const { return kind_; }

  // Fails on an empty conversation and on a role other than system, user and assistant, naming
  // the message.
  Expected<std::string> render(std::span<const ChatMessage> messages, const ChatOptions& options = {}) const;

 private:
  ChatTemplate(ChatTemplateKind kind, std::string bos_token) : kind_(kind), bos_token_(std::move(bos_token)) {}

  ChatTemplateKind kind_;
  std::string bos_token_;
};

}  // namespace evt::tokenizer
