#include "cli/bench_decode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/decode_batch.h"
#include "cli/write_json.h"
#include "model/presets.h"
#include "model/weights.h"

#ifdef EVT_HAVE_CUDA
#include "model/cuda_decoder.h"
#endif

namespace evt::cli {

namespace {

struct BenchDecodeArgs {
  std::vector<std::string> presets;
  std::vector<int64_t> batches = {1};
  std::vector<int64_t> contexts = {512};
  std::vector<std::string> execs = {"megakernel", "graphs", "kernels"};
  int reps = 30;
  int warmup = 5;
  std::string json_path;
  std::string commit;
  std::string trace_prefix;
  std::string tuning;
};

#ifdef EVT_HAVE_CUDA

// The weight bytes a step of `batch` tokens reads: every tensor, except in a sparse MoE layer only
// the experts its tokens choose. Which those are depends on routing; the floor counts the
// distinct experts expected when each token picks top-k of E uniformly, E (1 - (1 - k / E)^B)
// (the random-weight router routes close to uniformly).
int64_t weight_bytes(const model::ModelConfig& c, int64_t batch) {
  int64_t bytes = 0;
  for (const auto& spec : model::model_tensor_specs(c)) bytes += static_cast<int64_t>(spec.size_bytes());
  if (!c.has_moe_layers()) return bytes;
  const double experts = static_cast<double>(c.moe->num_experts), k = static_cast<double>(c.moe->num_experts_per_tok);
  const double unread = experts * std::pow(1 - k / experts, static_cast<double>(batch));
  const int64_t expert_bytes = 3 * c.hidden_size * c.moe->moe_intermediate_size * 2;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (c.is_moe_layer(l)) bytes -= static_cast<int64_t>(unread * static_cast<double>(expert_bytes));
  }
  return bytes;
}

void run_bench_decode(const BenchDecodeArgs& a) {
  const DeviceRead device = measure_device_read("bench decode");
  const double tbps = device.tbps;
  nlohmann::json results = nlohmann::json::array();
  fmt::print("{:<14} {:>4} {:>6} {:<20} {:>9} {:>9} {:>8}\n", "model", "B", "ctx", "exec", "ms/step", "floor ms",
             "x floor");
  std::shared_ptr<const model::TuningTable> tuning;
  if (!a.tuning.empty()) {
    auto table = model::load_tuning_table(a.tuning);
    if (!table.ok()) fail(kUsage, "--tuning " + table.status().message());
    tuning = std::make_shared<const model::TuningTable>(std::move(*table));
  }
  std::mt19937 rng(1);
  for (const std::string& preset : a.presets) {
    auto config = model::preset_config(preset);
    if (!config.ok()) fail(kUsage, config.status().message());
    const int64_t page_size = 16;
    const int64_t max_batch = *std::max_element(a.batches.begin(), a.batches.end());
    const int64_t max_ctx = *std::max_element(a.contexts.begin(), a.contexts.end());
    for (const std::string& exec_text : a.execs) {
      const auto exec = model::parse_exec(exec_text);
      if (!exec) fail(kUsage, fmt::format("--exec {}: expected one of {}", exec_text, model::exec_names()));
      model::CudaDecoderOptions o;
      o.exec = *exec;
      o.kv = model::KvGeometry{page_size, max_batch * (max_ctx / page_size + 1)};
      o.max_context = (max_ctx / page_size + 1) * page_size;
      auto decoder = model::make_cuda_decoder_random(*config, 0, o);
      if (!decoder.ok()) fail(kFailed, fmt::format("{} {}: {}", preset, exec_text, decoder.status().message()));
      if (const Status s = (*decoder)->set_tuning(tuning); !s.ok()) {
        fail(kUsage, fmt::format("--tuning {}, {}: {}", a.tuning, preset, s.message()));
      }
      const model::ModelConfig& c = (*decoder)->config();
      for (int64_t batch : a.batches) {
        for (int64_t ctx : a.contexts) {
          const model::StepBatch step = decode_batch(c, batch, ctx, page_size, rng);
          const double step_ms = median_step_ms(**decoder, step, a.warmup, a.reps,
                                                fmt::format("{} {} B={} ctx={}", preset, exec_text, batch, ctx));
          if (!a.trace_prefix.empty() && model::is_megakernel(*exec)) {
            // One more step, traced and untimed (recording costs time).
            const std::string file = fmt::format("{}-{}-B{}-ctx{}-{}.json", a.trace_prefix, preset, batch, ctx, exec_text);
            Status traced = (*decoder)->trace_next_step(file);
            if (traced.ok()) traced = (*decoder)->step(step, false).status();
            if (!traced.ok()) fail(kFailed, fmt::format("trace {}: {}", file, traced.message()));
          }
          const int64_t kv_bytes = batch * (ctx + 1) * c.num_layers * 2 * c.num_kv_heads * c.head_dim * 2;
          const int64_t read = weight_bytes(c, batch);
          const double floor_ms = static_cast<double>(read + kv_bytes) / (tbps * 1e12) * 1e3;
          fmt::print("{:<14} {:>4} {:>6} {:<20} {:>9.3f} {:>9.3f} {:>8.2f}\n", preset, batch, ctx, exec_text, step_ms,
                     floor_ms, step_ms / floor_ms);
          results.push_back({{"model", preset},
                             {"batch", batch},
                             {"ctx", ctx},
                             {"exec", exec_text},
                             {"median_ms", step_ms},
                             {"floor_ms", floor_ms},
                             {"latency_over_floor", step_ms / floor_ms},
                             {"weight_bytes", read},
                             {"kv_bytes", kv_bytes},
                             {"reps", a.reps},
                             {"tuning", a.tuning}});
        }
      }
    }
  }
  if (!a.json_path.empty()) {
    nlohmann::json j = {{"benchmark", "eventide bench decode: device time of one decode step (CUDA events), random weights"},
                        {"device", device.name},
                        {"sms", device.sms},
                        {"read_tbps", tbps},
                        {"commit", a.commit},
                        {"results", results}};
    write_json(a.json_path, j);
  }
}

#else

void run_bench_decode(const BenchDecodeArgs&) { fail(kUsage, "bench decode needs a build with CUDA (nvcc) and a GPU"); }

#endif

}  // namespace

void add_bench_decode_command(CLI::App& bench) {
  auto o = std::make_shared<BenchDecodeArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "decode",
      "Decode-step latency on the GPU for real model shapes with random weights: the median device time of one "
      "step per (model, batch, context, exec mode), against the floor (weight bytes + KV bytes read) / the "
      "streaming-read bandwidth measured in the same run. For an MoE model the floor reads the experts that B tokens "
      "are expected to choose under uniform routing");
  cmd->add_option("--preset", o->presets, fmt::format("model shapes, comma-separated: {}", fmt::join(model::preset_names(), ", ")))
      ->delimiter(',')
      ->required();
  cmd->add_option("--batch", o->batches, "batch sizes (sequences, one new token each), comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--ctx", o->contexts, "cached positions per sequence, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--exec", o->execs,
                  "exec modes, comma-separated: megakernel, megakernel-dynamic, megakernel-mixed, kernels, graphs")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "timed steps per measurement (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed steps first (graphs capture here)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "also write the results as JSON to this file");
  cmd->add_option("--commit", o->commit, "commit to record in the JSON");
  cmd->add_option("--trace", o->trace_prefix,
                  "also write a Chrome trace (Perfetto) of one extra, untimed step per megakernel measurement, to "
                  "PREFIX-<model>-B<b>-ctx<c>-<exec>.json");
  cmd->add_option("--tuning", o->tuning,
                  "a tuning table written by `eventide tune` for the --preset's shapes (one preset): steps take its "
                  "split counts instead of the built-in rules")
      ->check(CLI::ExistingFile);
  cmd->callback([o] { run_bench_decode(*o); });
}

}  // namespace evt::cli
