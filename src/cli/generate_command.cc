#include "cli/generate_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/stats.h"
#include "model/cpu_decoder.h"
#include "model/generate.h"
#include "model/presets.h"
#include "model/progress.h"

#ifdef EVT_HAVE_CUDA
#include <cuda_runtime.h>

#include "model/cuda_decoder.h"
#endif

namespace evt::cli {

namespace {

struct GenerateArgs {
  std::string model_dir;
  std::string preset;
  bool random_weights = false;
  uint64_t seed = 0;
  std::vector<std::string> prompt_ids;
  int64_t max_tokens = 16;
  std::string exec = "megakernel";
  std::string device;
  int workers = 4;
  int blocks = 0;
  int64_t page_size = 16;
  int64_t kv_pages = 0;
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

bool cuda_device_present() {
#ifdef EVT_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

// The decoder the flags ask for; fails the command on any error.
std::unique_ptr<model::Decoder> make_decoder(const GenerateArgs& a, const std::string& device, model::Exec exec,
                                             const model::KvGeometry& kv) {
  auto loaded_model = [&] {
    auto loaded = model::load_model(a.model_dir, {.progress = model::terminal_progress("loading " + a.model_dir)});
    if (!loaded.ok()) fail(kFailed, loaded.status().message());
    return *loaded;
  };
  auto made = [](Expected<std::unique_ptr<model::Decoder>> d, int code) {
    if (!d.ok()) fail(code, d.status().message());
    return std::move(*d);
  };
  if (device == "cpu") {
    if (a.random_weights) {
      fail(kUsage, "--random-weights generates weights on the GPU; for the CPU write a model with make-model");
    }
    return made(model::make_cpu_decoder(loaded_model(), {.exec = exec, .workers = a.workers, .kv = kv}), kUsage);
  }
#ifdef EVT_HAVE_CUDA
  model::CudaDecoderOptions o;
  o.exec = exec;
  o.kv = kv;
  o.blocks = a.blocks;
  if (!a.random_weights) return made(model::make_cuda_decoder(loaded_model(), o), kFailed);
  auto config = model::preset_config(a.preset);
  if (!config.ok()) fail(kUsage, config.status().message());
  return made(model::make_cuda_decoder_random(*config, a.seed, o), kFailed);
#else
  fail(kUsage, "this build has no CUDA backend");
#endif
}

void run_generate(const GenerateArgs& a) {
  if (a.model_dir.empty() == !a.random_weights) {
    fail(kUsage, "pass either --model DIR or --random-weights with --preset NAME");
  }
  const auto exec = model::parse_exec(a.exec);
  if (!exec) fail(kUsage, fmt::format("--exec {}: expected one of {}", a.exec, model::exec_names()));
  std::string device = a.device.empty() ? (cuda_device_present() ? "cuda" : "cpu") : a.device;
  if (device == "cuda" && !cuda_device_present()) {
    fail(kUsage, "--device cuda: no CUDA device (or this build has no CUDA backend); use --device cpu");
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& p : a.prompt_ids) prompts.push_back(parse_ids(p));

  // Pages for every prompt plus its new tokens, unless given.
  int64_t pages = a.kv_pages;
  if (pages == 0) {
    for (const auto& p : prompts) pages += (static_cast<int64_t>(p.size()) + a.max_tokens + a.page_size - 1) / a.page_size;
  }
  const model::KvGeometry kv{a.page_size, pages};

  std::unique_ptr<model::Decoder> decoder = make_decoder(a, device, *exec, kv);
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
    j["model"] = a.random_weights ? "random " + a.preset : a.model_dir;
    j["backend"] = decoder->describe();
    j["exec"] = a.exec;
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
  cmd->add_option("--model", opts->model_dir, "Hugging Face model directory (config.json + safetensors)");
  cmd->add_option("--preset", opts->preset,
                  fmt::format("model shape for --random-weights: {}", fmt::join(model::preset_names(), ", ")));
  cmd->add_flag("--random-weights", opts->random_weights,
                "generate seeded random weights on the GPU with the --preset's shapes instead of loading a "
                "checkpoint (no disk; for benchmarks of big models)");
  cmd->add_option("--seed", opts->seed, "seed of --random-weights")->capture_default_str();
  cmd->add_option("--prompt-ids", opts->prompt_ids,
                  "a prompt as comma-separated token ids; repeat the flag for a batch of prompts")
      ->required();
  cmd->add_option("--max-tokens", opts->max_tokens, "new tokens per prompt")->capture_default_str()->check(
      CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--exec", opts->exec,
                  "how each step runs: megakernel (one persistent kernel, static per-SM queues), "
                  "megakernel-dynamic (on-GPU ready queue), kernels (one launch per task group and layer), "
                  "graphs (kernels replayed from CUDA graphs per batch bucket; CUDA only), reference (the CPU "
                  "executor with the naive CPU references; CPU only)")
      ->capture_default_str();
  cmd->add_option("--device", opts->device, "cpu or cuda; default: cuda when a GPU is present, else cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--workers", opts->workers, "CPU backend: threads standing in for SMs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--blocks", opts->blocks,
                  "CUDA backend: blocks of the persistent grid (capped at what fits co-resident); default: every "
                  "block that fits co-resident")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--page-size", opts->page_size, "KV cache positions per page")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--kv-pages", opts->kv_pages, "KV cache pages; default: enough for every prompt and its new tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_flag("--stop-at-eos", opts->stop_at_eos, "end a sequence at one of the config's EOS token ids");
  cmd->add_option("--json", opts->json_path, "also write the tokens and step latencies to this JSON file");
  cmd->add_option("--commit", opts->commit, "commit recorded in the JSON (benchmark provenance)");
  cmd->callback([opts] { run_generate(*opts); });
}

}  // namespace evt::cli
