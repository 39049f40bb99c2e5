#include "cli/bench_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/decoder_flags.h"
#include "cli/stats.h"
#include "cli/write_json.h"
#include "engine/engine.h"

namespace evt::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Start-up is timed from here: static initialization, before main() runs.
const Clock::time_point kProcessStart = Clock::now();

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct BenchEngineArgs {
  DecoderFlags decoder;
  int64_t num_prompts = 256;
  int64_t input_min = 128, input_max = 2048;
  int64_t output_min = 128, output_max = 512;
  engine::SchedulerOptions scheduler;
  uint64_t workload_seed = 0;
  std::string json_path;
  std::string commit;
};

struct Workload {
  std::vector<engine::Request> requests;
  int64_t input_min, input_max, output_min, output_max;  // after scaling to the model
  double scale = 1;
};

// Random prompts of random lengths, each generating a random number of tokens (EOS ignored). A
// model with fewer positions than the longest request gets every length scaled down by the same
// factor, so the workload keeps its shape.
Workload make_workload(const BenchEngineArgs& a, int64_t max_context, int64_t vocab) {
  Workload w{{}, a.input_min, a.input_max, a.output_min, a.output_max};
  if (a.input_max + a.output_max > max_context) {
    w.scale = static_cast<double>(max_context) / static_cast<double>(a.input_max + a.output_max);
    for (int64_t* v : {&w.input_min, &w.input_max, &w.output_min, &w.output_max}) {
      *v = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(*v) * w.scale));
    }
  }
  std::mt19937_64 rng(a.workload_seed);
  const auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int64_t i = 0; i < a.num_prompts; ++i) {
    engine::Request r;
    r.prompt.resize(static_cast<size_t>(pick(w.input_min, w.input_max)));
    for (int32_t& id : r.prompt) id = static_cast<int32_t>(pick(0, vocab - 1));
    r.sampling.max_tokens = pick(w.output_min, w.output_max);
    r.sampling.ignore_eos = true;
    w.requests.push_back(std::move(r));
  }
  return w;
}

// What one request saw, from its callback.
struct RequestTiming {
  Clock::time_point first, last;
  int64_t tokens = 0;
  engine::FinishReason finish = engine::FinishReason::kNone;
  std::string error;
};

void run_bench_engine(const BenchEngineArgs& a) {
  engine::EngineOptions eo;
  eo.scheduler = a.scheduler;
  if (a.scheduler.chunk_size == 0 && a.scheduler.max_batched_tokens < a.input_max + a.output_max) {
    // Without chunking a request's whole prompt (and, after a preemption, its outputs) runs in one step.
    eo.scheduler.max_batched_tokens = a.input_max + a.output_max;
    fmt::print("--chunk-size 0: raising --max-batched-tokens to {} so that the longest request fits one step\n",
               eo.scheduler.max_batched_tokens);
  }
  eo.max_waiting = std::max<int64_t>(a.num_prompts, 1);
  const int64_t cpu_pages =
      a.num_prompts * ((a.input_max + a.output_max + a.decoder.page_size - 1) / a.decoder.page_size);
  MadeDecoder made = make_decoder(a.decoder, cpu_pages, 0);
  const model::DecoderStats before = made.decoder->stats();
  auto created = engine::Engine::create(std::move(made.decoder), eo);
  if (!created.ok()) fail(kUsage, created.status().message());
  engine::Engine& eng = **created;
  const Clock::time_point ready = Clock::now();
  const double startup_ms = ms_between(kProcessStart, ready);
  fmt::print("backend: {}\n", eng.decoder().describe());
  fmt::print("start-up: {:.0f} ms from process start to ready, {:.0f} ms of it reading weights from disk\n",
             startup_ms, made.weight_io_ms);

  const model::ModelConfig& c = eng.decoder().config();
  Workload w = make_workload(a, eng.max_context(), c.vocab_size);
  if (w.scale < 1) {
    fmt::print("the model serves {} positions: lengths scaled by {:.3f} to inputs {}-{}, outputs {}-{}\n",
               eng.max_context(), w.scale, w.input_min, w.input_max, w.output_min, w.output_max);
  }
  int64_t prompt_tokens = 0;
  for (const engine::Request& r : w.requests) prompt_tokens += static_cast<int64_t>(r.prompt.size());

  std::vector<RequestTiming> timing(w.requests.size());
  std::vector<double> itl_ms;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < w.requests.size(); ++i) {
    RequestTiming& t = timing[i];
    const engine::Submission s = eng.submit(std::move(w.requests[i]), [&t, &itl_ms](const engine::TokenEvent& e) {
      const Clock::time_point now = Clock::now();
      if (e.token >= 0) {
        if (t.tokens == 0) t.first = now;
        else itl_ms.push_back(ms_between(t.last, now));
        t.last = now;
        ++t.tokens;
      }
      if (e.finish != engine::FinishReason::kNone) {
        t.finish = e.finish;
        t.error = e.error;
      }
    });
    if (!s.accepted()) fail(kFailed, fmt::format("request {}: {}", i, s.error));
  }
  if (Status s = eng.run_until_idle(); !s.ok()) fail(kFailed, s.message());
  const Clock::time_point end = Clock::now();

  std::vector<double> ttft_ms, tpot_ms;
  int64_t output_tokens = 0;
  for (size_t i = 0; i < timing.size(); ++i) {
    const RequestTiming& t = timing[i];
    if (t.finish != engine::FinishReason::kLength) {
      fail(kFailed, fmt::format("request {} ended with {} {}", i, engine::finish_reason_name(t.finish), t.error));
    }
    output_tokens += t.tokens;
    ttft_ms.push_back(ms_between(start, t.first));
    if (t.tokens > 1) tpot_ms.push_back(ms_between(t.first, t.last) / static_cast<double>(t.tokens - 1));
  }
  const double elapsed_s = ms_between(start, end) / 1e3;
  const engine::EngineMetrics m = eng.metrics();
  const model::DecoderStats stats = eng.decoder().stats();
  const int64_t captures = stats.graphs_captured - before.graphs_captured;
  const double capture_ms = stats.capture_ms - before.capture_ms;

  fmt::print("{} requests: {} prompt tokens, {} output tokens in {:.2f} s; {} steps, {} preemptions\n",
             timing.size(), prompt_tokens, output_tokens, elapsed_s, m.steps, m.preemptions);
  fmt::print("{:<28} {:>10} {:>10}\n", "", "p50", "p99");
  fmt::print("{:<28} {:>10.2f} {:>10.2f}\n", "TTFT ms", percentile(ttft_ms, 0.5), percentile(ttft_ms, 0.99));
  fmt::print("{:<28} {:>10.2f} {:>10.2f}\n", "inter-token latency ms", percentile(itl_ms, 0.5),
             percentile(itl_ms, 0.99));
  fmt::print("{:<28} {:>10.2f} {:>10.2f}\n", "TPOT ms", percentile(tpot_ms, 0.5), percentile(tpot_ms, 0.99));
  fmt::print("output tokens/s: {:.1f}; distinct batch shapes: {}; compilations: 0; CUDA graphs captured: {} "
             "({:.0f} ms)\n",
             static_cast<double>(output_tokens) / elapsed_s, m.batch_shapes, captures, capture_ms);
  fmt::print("KV pages in use at the end: {} of {}\n", m.kv_pages_used, m.kv_pages_total);

  if (!a.json_path.empty()) {
    const nlohmann::json j = {
        {"benchmark", "eventide bench engine: offline workload, every request submitted at once"},
        {"commit", a.commit},
        {"backend", eng.decoder().describe()},
        {"model", a.decoder.random_weights ? "random " + a.decoder.preset : a.decoder.model_dir},
        {"exec", a.decoder.exec},
        {"requests", timing.size()},
        {"input_len", {w.input_min, w.input_max}},
        {"output_len", {w.output_min, w.output_max}},
        {"chunk_size", a.scheduler.chunk_size},
        {"max_batched_tokens", eo.scheduler.max_batched_tokens},
        {"max_sequences", a.scheduler.max_sequences},
        {"prompt_tokens", prompt_tokens},
        {"output_tokens", output_tokens},
        {"elapsed_s", elapsed_s},
        {"output_tokens_per_s", static_cast<double>(output_tokens) / elapsed_s},
        {"ttft_ms", {{"p50", percentile(ttft_ms, 0.5)}, {"p99", percentile(ttft_ms, 0.99)}}},
        {"itl_ms", {{"p50", percentile(itl_ms, 0.5)}, {"p99", percentile(itl_ms, 0.99)}}},
        {"tpot_ms", {{"p50", percentile(tpot_ms, 0.5)}, {"p99", percentile(tpot_ms, 0.99)}}},
        {"steps", m.steps},
        {"preemptions", m.preemptions},
        {"distinct_batch_shapes", m.batch_shapes},
        {"compilations", 0},
        {"graphs_captured", captures},
        {"capture_ms", capture_ms},
        {"startup_to_ready_ms", startup_ms},
        {"weight_io_ms", made.weight_io_ms},
        {"kv_pages_total", m.kv_pages_total},
        {"kv_pages_used_at_end", m.kv_pages_used}};
    write_json(a.json_path, j);
  }
  if (m.kv_pages_used != 0) fail(kFailed, fmt::format("{} KV pages still in use after every request ended", m.kv_pages_used));
}

}  // namespace

void add_bench_engine_command(CLI::App& bench) {
  auto o = std::make_shared<BenchEngineArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "engine",
      "An offline serving workload through the engine (continuous batching, chunked prefill, paged KV cache): "
      "--num-prompts requests of random token ids, all submitted at once, each generating a random number of "
      "tokens. Reports output tokens/s, TTFT, inter-token latency and TPOT (p50, p99), the distinct batch shapes "
      "the steps had, CUDA graphs captured (graphs mode) and the start-up time");
  add_decoder_flags(*cmd, o->decoder,
                    "CPU: enough for every request at once; CUDA: --kv-fraction of the free GPU memory");
  cmd->add_option("--num-prompts", o->num_prompts, "requests")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--input-len-min", o->input_min, "shortest prompt, tokens")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--input-len-max", o->input_max, "longest prompt, tokens")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--output-len-min", o->output_min, "fewest new tokens of a request")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--output-len-max", o->output_max, "most new tokens of a request")->capture_default_str()->check(CLI::PositiveNumber);
  add_scheduler_flags(*cmd, o->scheduler);
  cmd->add_option("--workload-seed", o->workload_seed, "seed of the prompts and lengths")->capture_default_str();
  cmd->add_option("--json", o->json_path, "also write the results as JSON to this file");
  cmd->add_option("--commit", o->commit, "commit to record in the JSON");
  cmd->callback([o] {
    if (o->input_min > o->input_max || o->output_min > o->output_max) {
      fail(kUsage, "--input-len-min/--output-len-min must not exceed their -max");
    }
    run_bench_engine(*o);
  });
}

}  // namespace evt::cli
