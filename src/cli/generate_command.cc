#include "cli/generate_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/decoder_flags.h"
#include "cli/stats.h"
#include "cli/write_json.h"
#include "model/generate.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace evt::cli {

namespace {

struct GenerateArgs {
  DecoderFlags decoder;
  std::vector<std::string> prompt_ids;
  std::vector<std::string> prompt_texts;
  bool chat = false;
  bool no_thinking = false;
  int64_t max_tokens = 16;
  bool stop_at_eos = false;
  std::string json_path;
  std::string commit;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      fail(kUsage, fmt::format("--prompt-ids: '{}' is not a token id (expected comma-separated ids, e.g. 1,2,3)", item));
    }
    at = comma + 1;
  }
  return ids;
}

tokenizer::Tokenizer load_tokenizer(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "tokenizer.json";
  // Checked here so that the message says why the file is needed and what to do without it.
  if (!std::filesystem::exists(path)) {
    fail(kFailed, fmt::format("--prompt needs the model's tokenizer, and {} does not exist (pass --prompt-ids instead)",
                              path.string()));
  }
  auto tokenizer = tokenizer::Tokenizer::load(path);
  if (!tokenizer.ok()) fail(kFailed, tokenizer.status().message());
  return std::move(*tokenizer);
}

// Each text prompt as token ids, as transformers would give them to the model: plain text with
// the tokenizer's special tokens (Llama's <|begin_of_text|>), or with --chat the text as one user
// message rendered by the model's chat template, which writes those tokens itself.
std::vector<std::vector<int32_t>> encode_prompts(const GenerateArgs& a, const tokenizer::Tokenizer& tokenizer) {
  std::optional<tokenizer::ChatTemplate> chat_template;
  if (a.chat) {
    auto loaded = tokenizer::ChatTemplate::load(std::filesystem::path(a.decoder.model_dir) / "tokenizer_config.json");
    if (!loaded.ok()) fail(kFailed, loaded.status().message());
    chat_template = std::move(*loaded);
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : a.prompt_texts) {
    if (!chat_template) {
      prompts.push_back(tokenizer.encode(text, /*add_special_tokens=*/true));
      continue;
    }
    const tokenizer::ChatMessage message{.role = "user", .content = text};
    auto rendered = chat_template->render(
        std::span(&message, 1), {.add_generation_prompt = true, .enable_thinking = !a.no_thinking});
    if (!rendered.ok()) fail(kFailed, rendered.status().message());
    prompts.push_back(tokenizer.encode(*rendered, /*add_special_tokens=*/false));
  }
  return prompts;
}

void run_generate(const GenerateArgs& a) {
  if (a.prompt_ids.empty() == a.prompt_texts.empty()) fail(kUsage, "pass either --prompt TEXT or --prompt-ids IDS");
  if (!a.prompt_texts.empty() && a.decoder.model_dir.empty()) {
    fail(kUsage, "--prompt needs --model DIR, whose tokenizer.json encodes it; random weights take --prompt-ids");
  }
  // Only text prompts need a tokenizer: --prompt-ids also runs models that have none.
  std::optional<tokenizer::Tokenizer> tokenizer;
  std::vector<std::vector<int32_t>> prompts;
  if (a.prompt_texts.empty()) {
    for (const std::string& p : a.prompt_ids) prompts.push_back(parse_ids(p));
  } else {
    tokenizer = load_tokenizer(a.decoder.model_dir);
    prompts = encode_prompts(a, *tokenizer);
  }
  // Pages for every prompt plus its new tokens.
  int64_t pages = 0;
  const int64_t page_size = a.decoder.page_size;
  for (const auto& p : prompts) pages += (static_cast<int64_t>(p.size()) + a.max_tokens + page_size - 1) / page_size;
  std::unique_ptr<model::Decoder> decoder = make_decoder(a.decoder, pages, pages).decoder;
  const model::ModelConfig& c = decoder->config();
  fmt::print("model: {} {} layers, hidden {}, {} / {} heads of {}, vocab {}\n", model::architecture_name(c.architecture),
             c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.vocab_size);
  fmt::print("backend: {}\n", decoder->describe());
  model::GenerateOptions go;
  go.max_tokens = a.max_tokens;
  go.stop_at_eos = a.stop_at_eos;
  auto r = model::generate(*decoder, prompts, go);
  if (!r.ok()) fail(kFailed, r.status().message());
  std::vector<std::string> texts;
  for (size_t i = 0; i < prompts.size(); ++i) {
    fmt::print("prompt {} ({} tokens) -> {}\n", i, prompts[i].size(), fmt::join(r->sequences[i].tokens, ","));
    if (!tokenizer) continue;
    // A model's vocab may be larger than its tokenizer's (padding rows), so decoding can fail.
    auto text = tokenizer->decode(r->sequences[i].tokens, /*skip_special=*/true);
    if (!text.ok()) fail(kFailed, fmt::format("prompt {}: {}", i, text.status().message()));
    // Quoted and escaped, so that newlines in the text do not look like more output lines.
    fmt::print("text {}: {}\n", i, nlohmann::json(*text).dump());
    texts.push_back(std::move(*text));
  }
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += static_cast<int64_t>(p.size());
  fmt::print("prefill: {} tokens in {:.3f} ms\n", prompt_tokens, r->step_ms[0]);
  const std::vector<double> decode(r->step_ms.begin() + 1, r->step_ms.end());
  if (!decode.empty()) {
    fmt::print("decode: {} steps of {} sequence{}: median {:.3f} ms/token, p10 {:.3f}, p90 {:.3f}\n", decode.size(),
               prompts.size(), prompts.size() == 1 ? "" : "s", percentile(decode, 0.5), percentile(decode, 0.1),
               percentile(decode, 0.9));
  }
  if (!a.json_path.empty()) {
    nlohmann::json j;
    j["model"] = a.decoder.random_weights ? "random " + a.decoder.preset : a.decoder.model_dir;
    j["backend"] = decoder->describe();
    j["exec"] = a.decoder.exec;
    j["commit"] = a.commit;
    j["batch"] = prompts.size();
    j["prompt_tokens"] = prompt_tokens;
    j["max_tokens"] = a.max_tokens;
    j["prefill_ms"] = r->step_ms[0];
    j["decode_step_ms"] = decode;
    j["decode_median_ms"] = percentile(decode, 0.5);
    for (const auto& s : r->sequences) j["tokens"].push_back(s.tokens);
    if (tokenizer) j["text"] = texts;
    write_json(a.json_path, j);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opts = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Greedy generation from text or token ids: every prompt's prefill in one step, then one step per new "
      "token for the whole batch, each step one launch of the dense decode graph. Prints the new token ids "
      "(and their text for text prompts) and the latency per step");
  add_decoder_flags(*cmd, opts->decoder, "enough for every prompt and its new tokens");
  CLI::Option* text = cmd->add_option(
      "--prompt", opts->prompt_texts,
      "a prompt as text, encoded by the model's tokenizer.json; repeat the flag for a batch of prompts");
  CLI::Option* ids = cmd->add_option("--prompt-ids", opts->prompt_ids,
                                     "a prompt as comma-separated token ids; repeat the flag for a batch of prompts");
  text->excludes(ids);
  CLI::Option* chat = cmd->add_flag(
      "--chat", opts->chat,
      "send each --prompt as one user message through the model's chat template (tokenizer_config.json), "
      "ending with the assistant's turn");
  chat->needs(text);
  cmd->add_flag("--no-thinking", opts->no_thinking, "with --chat on Qwen3: answer without reasoning (enable_thinking=false)")
      ->needs(chat);
  cmd->add_option("--max-tokens", opts->max_tokens, "new tokens per prompt")->capture_default_str()->check(
      CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--stop-at-eos", opts->stop_at_eos, "end a sequence at one of the config's EOS token ids");
  cmd->add_option("--json", opts->json_path, "also write the tokens and step latencies to this JSON file");
  cmd->add_option("--commit", opts->commit, "commit recorded in the JSON (benchmark provenance)");
  cmd->callback([opts] { run_generate(*opts); });
}

}  // namespace evt::cli
