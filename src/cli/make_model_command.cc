#include "cli/make_model_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <optional>

#include "cli/command_exit.h"
#include "model/make_model.h"
#include "model/presets.h"

namespace evt::cli {

namespace {

struct MakeModelArgs {
  std::string arch;
  std::string preset;
  bool random = false;
  uint64_t seed = 0;
  std::string out;
};

void run_make_model(const MakeModelArgs& o) {
  if (!o.random) {
    fail(kUsage, "make-model writes random weights only (there is no other source yet); pass --random");
  }
  std::optional<model::Architecture> arch;
  if (!o.arch.empty()) arch = model::parse_architecture_name(o.arch);
  auto config = model::preset_config(o.preset, arch);
  if (!config.ok()) fail(kUsage, config.status().message());

  const auto written = model::write_random_model(
      *config, o.out, {.seed = o.seed, .progress = model::terminal_progress("writing " + o.out)});
  if (!written.ok()) fail(kFailed, written.status().message());
  fmt::print("wrote {} {} ({:.2f}B parameters, {:.2f} GiB in {} file{}) with seed {} to {}\n",
             model::architecture_name(config->architecture), o.preset, written->num_parameters / 1e9,
             written->total_bytes / double(1ull << 30), written->num_shards, written->num_shards == 1 ? "" : "s",
             o.seed, o.out);
}

}  // namespace

void add_make_model_command(CLI::App& app) {
  auto opts = std::make_shared<MakeModelArgs>();
  CLI::App* cmd = app.add_subcommand(
      "make-model",
      "Write a Hugging Face checkpoint (config.json and bf16 safetensors, sharded at 4 GiB) with a published "
      "model's shapes and random weights, for tests and benchmarks without downloading weights");
  cmd->add_option("--arch", opts->arch, "architecture; needed only when a short preset name is ambiguous")
      ->check(CLI::IsMember({"qwen3", "qwen3_moe", "llama"}));
  cmd->add_option("--preset", opts->preset,
                  fmt::format("model shape: {} (the part after the architecture's prefix also works, e.g. 0.6b)",
                              fmt::join(model::preset_names(), ", ")))
      ->required();
  cmd->add_flag("--random", opts->random,
                "fill the weights with seeded random values (std 0.02; norm weights 1.0); required, as it is the "
                "only source so far");
  cmd->add_option("--seed", opts->seed, "seed for the random weights; the same seed gives the same files")
      ->capture_default_str();
  cmd->add_option("--out", opts->out, "directory to write; created if missing, and must be empty")->required();
  cmd->callback([opts] { run_make_model(*opts); });
}

}  // namespace evt::cli
