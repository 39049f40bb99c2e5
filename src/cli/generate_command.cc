#include "cli/generate_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/decoder_flags.h"
#include "cli/stats.h"
#include "model/generate.h"

namespace evt::cli {

namespace {

struct GenerateArgs {
  DecoderFlags decoder;
  std::vector<std::string> prompt_ids;
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

void run_generate(const GenerateArgs& a) {
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& p : a.prompt_ids) prompts.push_back(parse_ids(p));
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
  for (size_t i = 0; i < prompts.size(); ++i) {
    fmt::print("prompt {} ({} tokens) -> {}\n", i, prompts[i].size(), fmt::join(r->sequences[i].tokens, ","));
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
    std::ofstream out(a.json_path);
    out << j.dump(2) << "\n";
    if (!out) fail(kFailed, fmt::format("cannot write {}", a.json_path));
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto opts = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Greedy generation from token ids: every prompt's prefill in one step, then one step per new token for "
      "the whole batch, each step one launch of the dense decode graph. Prints the new token ids and the "
      "latency per step");
  add_decoder_flags(*cmd, opts->decoder, "enough for every prompt and its new tokens");
  cmd->add_option("--prompt-ids", opts->prompt_ids,
                  "a prompt as comma-separated token ids; repeat the flag for a batch of prompts")
      ->required();
  cmd->add_option("--max-tokens", opts->max_tokens, "new tokens per prompt")->capture_default_str()->check(
      CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--stop-at-eos", opts->stop_at_eos, "end a sequence at one of the config's EOS token ids");
  cmd->add_option("--json", opts->json_path, "also write the tokens and step latencies to this JSON file");
  cmd->add_option("--commit", opts->commit, "commit recorded in the JSON (benchmark provenance)");
  cmd->callback([opts] { run_generate(*opts); });
}

}  // namespace evt::cli
