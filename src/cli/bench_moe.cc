#include "cli/bench_moe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/decode_batch.h"
#include "cli/stats.h"
#include "cli/write_json.h"
#include "model/moe_graph.h"
#include "model/presets.h"
#include "util/int_math.h"

#ifdef EVT_HAVE_CUDA
#include "model/cuda_decoder.h"
#endif

namespace evt::cli {

namespace {

struct BenchMoeArgs {
  std::string preset = "qwen3-30b-a3b";
  std::vector<int64_t> tokens = {1, 8, 32, 128, 1024};
  std::vector<std::string> execs = {"megakernel", "megakernel-mixed", "megakernel-dynamic", "kernels"};
  int64_t layers = 8;
  int64_t ctx = 16;
  int reps = 10;
  int warmup = 3;
  std::string json_path;
  std::string commit;
};

#ifdef EVT_HAVE_CUDA

// One (exec, tokens) measurement: every MoE layer of every traced step.
struct MoeSamples {
  std::vector<double> us;        // the block's time per (step, layer)
  std::vector<double> floor_us;  // its floor per (step, layer)
  std::vector<double> experts;   // distinct experts routed per layer (of the first step)
};

// Times the MoE block of `tokens` decode tokens (one per sequence, `ctx` positions cached) over
// `reps` traced steps after `warmup` untraced ones. The floor of a layer reads its router, its
// norm and the experts its tokens chose once: the bytes over the streaming-read bandwidth.
MoeSamples time_moe_block(model::Decoder& d, int64_t tokens, const BenchMoeArgs& a, double tbps,
                          const std::string& what) {
  const model::ModelConfig& c = d.config();
  std::mt19937 rng(static_cast<uint32_t>(tokens));  // the same tokens, so the same routing, in every exec mode
  const model::StepBatch batch = decode_batch(c, tokens, a.ctx, d.kv().page_size, rng);
  const int64_t per_expert = ceil_div(c.moe->moe_intermediate_size, d.step_tiling(tokens, a.ctx + 1).rows_xi);
  const double expert_bytes = 3.0 * static_cast<double>(c.hidden_size * c.moe->moe_intermediate_size) * 2;
  const double fixed_bytes = static_cast<double>((c.moe->num_experts + 1) * c.hidden_size) * 2;
  MoeSamples s;
  for (int r = -a.warmup; r < a.reps; ++r) {
    if (r >= 0) {
      if (Status t = d.trace_next_step(""); !t.ok()) fail(kUsage, fmt::format("{}: {}", what, t.message()));
    }
    auto out = d.step(batch, false);
    if (!out.ok()) fail(kFailed, fmt::format("{}: {}", what, out.status().message()));
    if (r < 0) continue;
    auto blocks = model::moe_block_times(out->stages);
    if (!blocks.ok()) fail(kFailed, fmt::format("{}: {}", what, blocks.status().message()));
    for (const model::MoeBlockTime& b : *blocks) {
      if (!c.is_moe_layer(b.layer)) continue;
      const double experts = static_cast<double>(b.gate_up_tiles / per_expert);
      s.us.push_back(b.us);
      s.floor_us.push_back((experts * expert_bytes + fixed_bytes) / (tbps * 1e6));
      if (r == 0) s.experts.push_back(experts);
    }
  }
  return s;
}

void run_bench_moe(const BenchMoeArgs& a) {
  const DeviceRead device = measure_device_read("bench moe");
  auto config = model::preset_config(a.preset);
  if (!config.ok()) fail(kUsage, config.status().message());
  if (!config->has_moe_layers()) fail(kUsage, fmt::format("--preset {} has no MoE layers", a.preset));
  if (a.layers > 0) config->num_layers = a.layers;
  const int64_t max_tokens = *std::max_element(a.tokens.begin(), a.tokens.end());
  const int64_t page_size = 16;

  std::map<int64_t, double> kernels_us;  // by tokens, for the speedup column
  fmt::print("{} ({} layers): the MoE block per layer, from x_mid complete to x complete, in traced steps\n",
             a.preset, config->num_layers);
  fmt::print("{:>6} {:<20} {:>9} {:>9} {:>8} {:>10} {:>8} {:>11}\n", "tokens", "exec", "median us", "p90 us",
             "experts", "floor us", "x floor", "kernels / x");
  std::vector<nlohmann::json> rows;
  for (const std::string& exec_text : a.execs) {
    const auto exec = model::parse_exec(exec_text);
    if (!exec || *exec == model::Exec::kGraphs || *exec == model::Exec::kReference) {
      fail(kUsage, fmt::format("--exec {}: expected megakernel, megakernel-mixed, megakernel-dynamic or kernels (the "
                               "modes whose launches are traced)",
                               exec_text));
    }
    model::CudaDecoderOptions o;
    o.exec = *exec;
    o.kv = model::KvGeometry{page_size, max_tokens * (a.ctx / page_size + 1)};
    o.max_context = (a.ctx / page_size + 1) * page_size;
    auto decoder = model::make_cuda_decoder_random(*config, 0, o);
    if (!decoder.ok()) fail(kFailed, fmt::format("{} {}: {}", a.preset, exec_text, decoder.status().message()));
    for (int64_t tokens : a.tokens) {
      const MoeSamples s =
          time_moe_block(**decoder, tokens, a, device.tbps, fmt::format("{} {} tokens={}", a.preset, exec_text, tokens));
      const double us = median(s.us), floor_us = median(s.floor_us), experts = mean(s.experts);
      if (*exec == model::Exec::kKernels) kernels_us[tokens] = us;
      rows.push_back({{"tokens", tokens},
                      {"exec", exec_text},
                      {"median_us", us},
                      {"p90_us", percentile(s.us, 0.9)},
                      {"experts_hit", experts},
                      {"floor_us", floor_us},
                      {"latency_over_floor", us / floor_us},
                      {"samples", s.us.size()}});
    }
  }
  // Printed after every mode ran, so the kernels mode's column is known for each row.
  nlohmann::json results = nlohmann::json::array();
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x["tokens"] < y["tokens"]; });
  for (nlohmann::json& r : rows) {
    const int64_t tokens = r["tokens"];
    const double us = r["median_us"];
    std::string speedup = "-";
    if (auto it = kernels_us.find(tokens); it != kernels_us.end()) {
      r["kernels_over_this"] = it->second / us;
      speedup = fmt::format("{:.2f}", it->second / us);
    }
    fmt::print("{:>6} {:<20} {:>9.1f} {:>9.1f} {:>8.1f} {:>10.1f} {:>8.2f} {:>11}\n", tokens,
               r["exec"].get<std::string>(), us, r["p90_us"].get<double>(), r["experts_hit"].get<double>(),
               r["floor_us"].get<double>(), r["latency_over_floor"].get<double>(), speedup);
    results.push_back(r);
  }
  if (!a.json_path.empty()) {
    nlohmann::json j = {
        {"benchmark",
         "eventide bench moe: the MoE block of each layer inside traced decode steps (x_mid complete to x complete), "
         "random weights and router"},
        {"device", device.name},
        {"sms", device.sms},
        {"read_tbps", device.tbps},
        {"preset", a.preset},
        {"layers", config->num_layers},
        {"ctx", a.ctx},
        {"reps", a.reps},
        {"commit", a.commit},
        {"results", results}};
    write_json(a.json_path, j);
  }
}

#else

void run_bench_moe(const BenchMoeArgs&) { fail(kUsage, "bench moe needs a build with CUDA (nvcc) and a GPU"); }

#endif

}  // namespace

void add_bench_moe_command(CLI::App& bench) {
  auto o = std::make_shared<BenchMoeArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "moe",
      "MoE layer latency on the GPU: the MoE block (router, plan, expert gate/up and down, combine) of each layer, "
      "timed inside traced decode steps of T tokens with random weights and router, from the layer's attention output "
      "being complete to the block's output being complete; the median over layers and steps per (tokens, exec mode), "
      "the distinct experts the tokens were routed to, and the floor: the router and those experts' bytes / the "
      "streaming-read bandwidth measured in the same run");
  std::vector<std::string> moe_presets;  // the presets with MoE layers
  for (const std::string& name : model::preset_names()) {
    if (auto c = model::preset_config(name); c.ok() && c->has_moe_layers()) moe_presets.push_back(name);
  }
  cmd->add_option("--preset", o->preset, fmt::format("model shapes with MoE layers: {}", fmt::join(moe_presets, ", ")))
      ->capture_default_str();
  cmd->add_option("--tokens", o->tokens, "token counts (decode sequences of one token each), comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{65536}))
      ->capture_default_str();
  cmd->add_option("--exec", o->execs,
                  "exec modes, comma-separated: megakernel, megakernel-mixed, megakernel-dynamic, kernels")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--layers", o->layers,
                  "layers of the model (its MoE layer shapes unchanged; fewer load faster); 0: the preset's")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}))
      ->capture_default_str();
  cmd->add_option("--ctx", o->ctx, "cached positions per sequence (attention is outside the timed block)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "traced steps per measurement (every MoE layer of each is a sample)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untraced steps first")->check(CLI::Range(0, 1000))->capture_default_str();
  cmd->add_option("--json", o->json_path, "also write the results as JSON to this file");
  cmd->add_option("--commit", o->commit, "commit to record in the JSON");
  cmd->callback([o] { run_bench_moe(*o); });
}

}  // namespace evt::cli
