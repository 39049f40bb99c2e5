#include "cli/decoder_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "cli/command_exit.h"
#include "model/cpu_decoder.h"
#include "model/presets.h"
#include "model/progress.h"

#ifdef EVT_HAVE_CUDA
#include <cuda_runtime.h>

#include "model/cuda_decoder.h"
#endif

namespace evt::cli {

namespace {

bool cuda_device_present() {
#ifdef EVT_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

std::unique_ptr<model::Decoder> made(Expected<std::unique_ptr<model::Decoder>> d, int code) {
  if (!d.ok()) fail(code, d.status().message());
  return std::move(*d);
}

}  // namespace

void add_scheduler_flags(CLI::App& cmd, engine::SchedulerOptions& s) {
  cmd.add_option("--max-batched-tokens", s.max_batched_tokens, "tokens per step (decodes and prefill chunks)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_option("--chunk-size", s.chunk_size, "prefill tokens per sequence per step; 0: no chunking (whole prompts)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--max-sequences", s.max_sequences, "sequences per step")->capture_default_str()->check(CLI::PositiveNumber);
}

void add_decoder_flags(CLI::App& cmd, DecoderFlags& f, const std::string& kv_pages_default) {
  cmd.add_option("--model", f.model_dir, "Hugging Face model directory (config.json + safetensors)");
  cmd.add_option("--preset", f.preset,
                 fmt::format("model shape for --random-weights: {}", fmt::join(model::preset_names(), ", ")));
  cmd.add_flag("--random-weights", f.random_weights,
               "generate seeded random weights on the GPU with the --preset's shapes instead of loading a "
               "checkpoint (no disk; for benchmarks of big models)");
  cmd.add_option("--seed", f.seed, "seed of --random-weights")->capture_default_str();
  cmd.add_option("--exec", f.exec,
                 "how each step runs: megakernel (one persistent kernel, static per-SM queues), "
                 "megakernel-dynamic (on-GPU ready queue), megakernel-mixed (each task group as the graph says: "
                 "an MoE model's expert tiles from the ready queue, the rest static), kernels (one launch per "
                 "task group and layer), "
                 "graphs (kernels replayed from CUDA graphs per batch bucket; CUDA only), reference (the CPU "
                 "executor with the naive CPU references; CPU only)")
      ->capture_default_str();
  cmd.add_option("--device", f.device, "cpu or cuda; default: cuda when a GPU is present, else cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--workers", f.workers, "CPU backend: threads standing in for SMs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--blocks", f.blocks,
                 "CUDA backend: blocks of the persistent grid (capped at what fits co-resident); default: every "
                 "block that fits co-resident")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--page-size", f.page_size, "KV cache positions per page")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd.add_option("--kv-pages", f.kv_pages, "KV cache pages; default: " + kv_pages_default)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd.add_option("--kv-fraction", f.kv_fraction,
                 "CUDA backend without --kv-pages: the fraction of the GPU memory free after the weights that the "
                 "KV cache takes")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 0.95));
  cmd.add_option("--tuning", f.tuning,
                 "a tuning table written by `eventide tune` for this model's shapes: each step takes the QKV and KV "
                 "split counts measured best for the nearest batch size and context instead of the built-in rules")
      ->check(CLI::ExistingFile);
}

namespace {

// The decoder made, with the --tuning table when one was given.
MadeDecoder tuned(MadeDecoder made, const DecoderFlags& f) {
  if (f.tuning.empty()) return made;
  auto table = model::load_tuning_table(f.tuning);
  if (!table.ok()) fail(kUsage, "--tuning " + table.status().message());
  const Status s = made.decoder->set_tuning(std::make_shared<const model::TuningTable>(std::move(*table)));
  if (!s.ok()) fail(kUsage, fmt::format("--tuning {}: {}", f.tuning, s.message()));
  return made;
}

MadeDecoder make_untuned_decoder(const DecoderFlags& f, int64_t cpu_kv_pages, int64_t cuda_kv_pages) {
  if (f.model_dir.empty() == !f.random_weights) fail(kUsage, "pass either --model DIR or --random-weights with --preset NAME");
  const auto exec = model::parse_exec(f.exec);
  if (!exec) fail(kUsage, fmt::format("--exec {}: expected one of {}", f.exec, model::exec_names()));
  const std::string device = f.device.empty() ? (cuda_device_present() ? "cuda" : "cpu") : f.device;
  if (device == "cuda" && !cuda_device_present()) {
    fail(kUsage, "--device cuda: no CUDA device (or this build has no CUDA backend); use --device cpu");
  }
  const model::KvGeometry kv{f.page_size, f.kv_pages > 0 ? f.kv_pages : device == "cpu" ? cpu_kv_pages : cuda_kv_pages};
  MadeDecoder out;
  auto loaded_model = [&] {
    const auto start = std::chrono::steady_clock::now();
    auto loaded = model::load_model(f.model_dir, {.progress = model::terminal_progress("loading " + f.model_dir)});
    if (!loaded.ok()) fail(kFailed, loaded.status().message());
    out.weight_io_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return *loaded;
  };
  if (device == "cpu") {
    if (f.random_weights) fail(kUsage, "--random-weights generates weights on the GPU; for the CPU write a model with make-model");
    out.decoder = made(model::make_cpu_decoder(loaded_model(), {.exec = *exec, .workers = f.workers, .kv = kv}), kUsage);
    return out;
  }
#ifdef EVT_HAVE_CUDA
  model::CudaDecoderOptions o;
  o.exec = *exec;
  o.kv = kv;
  o.kv_fraction = f.kv_fraction;
  o.blocks = f.blocks;
  if (!f.random_weights) {
    out.decoder = made(model::make_cuda_decoder(loaded_model(), o), kFailed);
    return out;
  }
  auto config = model::preset_config(f.preset);
  if (!config.ok()) fail(kUsage, config.status().message());
  out.decoder = made(model::make_cuda_decoder_random(*config, f.seed, o), kFailed);
  return out;
#else
  fail(kUsage, "this build has no CUDA backend");
#endif
}

}  // namespace

MadeDecoder make_decoder(const DecoderFlags& f, int64_t cpu_kv_pages, int64_t cuda_kv_pages) {
  return tuned(make_untuned_decoder(f, cpu_kv_pages, cuda_kv_pages), f);
}

}  // namespace evt::cli
