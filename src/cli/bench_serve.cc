#include "cli/bench_serve.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <regex>
#include <semaphore>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cli/command_exit.h"
#include "cli/serve_client.h"
#include "cli/stats.h"
#include "cli/write_json.h"

namespace evt::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Each read of a response may wait this long (a long prefill under load, on a slow backend).
constexpr int kReadTimeoutS = 600;

struct BenchServeArgs {
  std::string url = "http://127.0.0.1:8000";
  std::string endpoint = "completions";
  std::string model;
  std::string request_rate = "inf";
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0;
  uint64_t seed = 0;
  int64_t max_concurrency = 0;
  int64_t vocab_size = 0;
  std::string json_path;
  std::string commit;
};

struct Prompt {
  std::vector<int32_t> ids;  // completions
  std::string text;          // chat
  int64_t input_len = 0, output_len = 0;
};

// vLLM's random dataset: lengths uniform in [L * (1 - ratio), L * (1 + ratio)], and prompt i
// the ids (offset_i + i + j) mod vocab from a random offset. Chat takes text, so its prompt is
// that many random two-letter words (about a token each with a large vocab; the server's usage
// then says how many tokens the rendered chat had).
std::vector<Prompt> random_prompts(const BenchServeArgs& a, int64_t vocab, bool chat) {
  std::mt19937_64 rng(a.seed);
  const auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const auto range = [&](int64_t len, int64_t floor) {
    return std::pair(std::max(floor, static_cast<int64_t>(static_cast<double>(len) * (1 - a.range_ratio))),
                     std::max(floor, static_cast<int64_t>(static_cast<double>(len) * (1 + a.range_ratio))));
  };
  const auto [in_lo, in_hi] = range(a.input_len, 1);
  const auto [out_lo, out_hi] = range(a.output_len, 1);
  std::vector<Prompt> out;
  for (int64_t i = 0; i < a.num_prompts; ++i) {
    Prompt p;
    p.input_len = uniform(in_lo, in_hi);
    p.output_len = uniform(out_lo, out_hi);
    const int64_t offset = uniform(0, vocab - 1);
    for (int64_t j = 0; j < p.input_len; ++j) {
      if (chat) {
        p.text += fmt::format(" {}{}", static_cast<char>('a' + uniform(0, 25)), static_cast<char>('a' + uniform(0, 25)));
      } else {
        p.ids.push_back(static_cast<int32_t>((offset + i + j) % vocab));
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Greedy, EOS ignored (every request generates exactly its output length), streamed with a
// final usage chunk: what vLLM's client sends.
json request_body(const Prompt& p, const std::string& model, bool chat) {
  json body = {{"model", model},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
    body["max_completion_tokens"] = p.output_len;
  } else {
    body["prompt"] = p.ids;
    body["max_tokens"] = p.output_len;
  }
  return body;
}

// Seconds from the start at which each request is sent: a Poisson process at `rate` requests
// per second (exponential gaps, vLLM's default burstiness of 1), or all at once for inf.
std::vector<double> arrival_times(int64_t n, double rate, uint64_t seed) {
  std::vector<double> at(static_cast<size_t>(n), 0);
  if (std::isinf(rate)) return at;
  std::mt19937_64 rng(seed + 1);
  std::exponential_distribution<double> gap(rate);
  for (size_t i = 1; i < at.size(); ++i) at[i] = at[i - 1] + gap(rng);
  return at;
}

struct Distribution {
  double mean, median, std, p90, p99;
};

// Milliseconds, from samples in seconds.
Distribution distribution_ms(const std::vector<double>& s) {
  std::vector<double> ms;
  for (double x : s) ms.push_back(x * 1e3);
  return {mean(ms), percentile_interpolated(ms, 0.5), stddev(ms), percentile_interpolated(ms, 0.9),
          percentile_interpolated(ms, 0.99)};
}

// The process's own command line, for the record.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (size_t start = 0; start < raw.size();) {
    const size_t end = raw.find('\0', start);
    const std::string arg = raw.substr(start, end - start);
    if (!out.empty()) out += ' ';
    const bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos;
    out += plain ? arg : "'" + std::regex_replace(arg, std::regex("'"), "'\\''") + "'";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// --request-rate: requests per second, or infinity for "inf".
double parse_rate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  double rate = 0;
  try {
    size_t used = 0;
    rate = std::stod(text, &used);
    if (used != text.size()) rate = 0;
  } catch (const std::exception&) {
  }
  if (!(rate > 0) || std::isinf(rate)) fail(kUsage, fmt::format("--request-rate {}: expected a positive number or inf", text));
  return rate;
}

// Sends request i at arrivals[i] seconds from the start, on a thread of its own, at most
// `max_concurrency` in flight (0: no limit); returns when every one has ended.
std::vector<StreamedResult> send_all(const std::vector<json>& bodies, const std::vector<double>& arrivals,
                                     int64_t max_concurrency, const std::string& url, const std::string& path) {
  std::vector<StreamedResult> results(bodies.size());
  std::counting_semaphore<> slots(max_concurrency > 0 ? max_concurrency : std::numeric_limits<int32_t>::max());
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < bodies.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
    slots.acquire();  // a request that arrives while the limit is reached waits here, in order
    threads.emplace_back([&, i] {
      results[i] = post_streamed(url, path, bodies[i], kReadTimeoutS);
      slots.release();
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// vLLM's calculate_metrics: over the successful requests; TPOT of each with more than one token.
struct Metrics {
  int64_t completed = 0, input_tokens = 0, output_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2el;  // seconds
  std::vector<std::string> errors;            // one per failed request
};

Metrics metrics_of(const std::vector<StreamedResult>& results, const std::vector<Prompt>& prompts) {
  Metrics m;
  for (size_t i = 0; i < results.size(); ++i) {
    const StreamedResult& r = results[i];
    if (!r.success) {
      m.errors.push_back(fmt::format("request {}: {}", i, r.error));
      continue;
    }
    ++m.completed;
    const int64_t out = r.output_tokens.value_or(r.chunks);
    m.input_tokens += r.prompt_tokens.value_or(prompts[i].input_len);
    m.output_tokens += out;
    m.ttft.push_back(r.ttft_s);
    if (out > 1) m.tpot.push_back((r.latency_s - r.ttft_s) / static_cast<double>(out - 1));
    m.itl.insert(m.itl.end(), r.itl_s.begin(), r.itl_s.end());
    m.e2el.push_back(r.latency_s);
  }
  return m;
}

// Prints vLLM's table and returns the results as vLLM's JSON keys.
json report(const Metrics& m, double duration_s, const BenchServeArgs& a) {
  const auto failed = static_cast<int64_t>(m.errors.size());
  const double request_throughput = static_cast<double>(m.completed) / duration_s;
  const double output_throughput = static_cast<double>(m.output_tokens) / duration_s;
  const double total_throughput = static_cast<double>(m.input_tokens + m.output_tokens) / duration_s;
  fmt::print("{:=^50}\n", " Serving Benchmark Result ");
  const auto row = [](const std::string& name, const std::string& value) { fmt::print("{:<40} {:<10}\n", name, value); };
  row("Successful requests:", std::to_string(m.completed));
  row("Failed requests:", std::to_string(failed));
  row("Maximum request concurrency:", a.max_concurrency > 0 ? std::to_string(a.max_concurrency) : "None");
  row("Request rate configured (RPS):", a.request_rate);
  row("Benchmark duration (s):", fmt::format("{:.2f}", duration_s));
  row("Total input tokens:", std::to_string(m.input_tokens));
  row("Total generated tokens:", std::to_string(m.output_tokens));
  row("Request throughput (req/s):", fmt::format("{:.2f}", request_throughput));
  row("Output token throughput (tok/s):", fmt::format("{:.2f}", output_throughput));
  row("Total token throughput (tok/s):", fmt::format("{:.2f}", total_throughput));
  json j = {{"duration", duration_s},
            {"completed", m.completed},
            {"failed", failed},
            {"total_input_tokens", m.input_tokens},
            {"total_output_tokens", m.output_tokens},
            {"request_throughput", request_throughput},
            {"output_throughput", output_throughput},
            {"total_token_throughput", total_throughput},
            {"errors", std::vector<std::string>(m.errors.begin(), m.errors.begin() + std::min<size_t>(m.errors.size(), 20))}};
  for (const auto& [key, title, name, samples] :
       {std::tuple{"ttft", "Time to First Token", "TTFT", &m.ttft},
        std::tuple{"tpot", "Time per Output Token (excl. 1st token)", "TPOT", &m.tpot},
        std::tuple{"itl", "Inter-token Latency", "ITL", &m.itl}, std::tuple{"e2el", "End-to-end Latency", "E2EL", &m.e2el}}) {
    const Distribution d = distribution_ms(*samples);
    fmt::print("{:-^50}\n", title);
    row(fmt::format("Mean {} (ms):", name), fmt::format("{:.2f}", d.mean));
    row(fmt::format("Median {} (ms):", name), fmt::format("{:.2f}", d.median));
    row(fmt::format("P90 {} (ms):", name), fmt::format("{:.2f}", d.p90));
    row(fmt::format("P99 {} (ms):", name), fmt::format("{:.2f}", d.p99));
    const std::string k = key;
    j["mean_" + k + "_ms"] = d.mean;
    j["median_" + k + "_ms"] = d.median;
    j["std_" + k + "_ms"] = d.std;
    j["p90_" + k + "_ms"] = d.p90;
    j["p99_" + k + "_ms"] = d.p99;
  }
  fmt::print("{:=^50}\n", "");
  for (size_t i = 0; i < std::min<size_t>(m.errors.size(), 5); ++i) fmt::print(stderr, "{}\n", m.errors[i]);
  return j;
}

void run_bench_serve(const BenchServeArgs& a) {
  const bool chat = a.endpoint == "chat";
  const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
  const double rate = parse_rate(a.request_rate);
  if (!std::regex_match(a.url, std::regex(R"(http://[^/\s]+)"))) {
    fail(kUsage, fmt::format("--url {}: expected http://HOST:PORT", a.url));
  }
  const Expected<ServedModelInfo> served = served_model(a.url, 30);
  if (!served.ok()) fail(kFailed, served.status().message());
  const std::string model = a.model.empty() ? served->id : a.model;
  const int64_t vocab = a.vocab_size > 0 ? a.vocab_size : served->vocab_size.value_or(0);
  if (!chat && vocab <= 0) {
    fail(kUsage, fmt::format("{}/v1/models reports no vocab_size; pass --vocab-size for prompts of token ids", a.url));
  }
  const std::vector<Prompt> prompts = random_prompts(a, std::max<int64_t>(vocab, 1), chat);
  int64_t longest = 0;
  for (const Prompt& p : prompts) longest = std::max(longest, p.input_len + p.output_len);
  if (!chat && served->max_model_len && longest > *served->max_model_len) {
    fail(kUsage, fmt::format("a request of {} prompt and output tokens does not fit the {} positions {} serves; "
                             "lower --random-input-len or --random-output-len",
                             longest, *served->max_model_len, served->id));
  }
  std::vector<json> bodies;
  for (const Prompt& p : prompts) bodies.push_back(request_body(p, model, chat));

  fmt::print("{} requests to {}{} (model {}), request rate {}, max concurrency {}\n", a.num_prompts, a.url, path, model,
             a.request_rate, a.max_concurrency > 0 ? std::to_string(a.max_concurrency) : "unlimited");
  // One request first, as vLLM does, to fail fast on a server that cannot serve the workload.
  const StreamedResult test = post_streamed(a.url, path, bodies[0], kReadTimeoutS);
  if (!test.success) fail(kFailed, "the initial test request failed: " + test.error);
  std::fflush(stdout);

  const Clock::time_point start = Clock::now();
  const std::vector<StreamedResult> results =
      send_all(bodies, arrival_times(a.num_prompts, rate, a.seed), a.max_concurrency, a.url, path);
  const double duration_s = std::chrono::duration<double>(Clock::now() - start).count();

  json j = {{"benchmark", "eventide bench serve: vLLM's bench serve metrics over a random workload"},
            {"command", command_line()},
            {"commit", a.commit},
            {"url", a.url},
            {"endpoint", path},
            {"model_id", served->id},
            {"num_prompts", a.num_prompts},
            {"request_rate", std::isinf(rate) ? json("inf") : json(rate)},
            {"max_concurrency", a.max_concurrency > 0 ? json(a.max_concurrency) : json(nullptr)},
            {"random_input_len", a.input_len},
            {"random_output_len", a.output_len},
            {"random_range_ratio", a.range_ratio},
            {"seed", a.seed}};
  j.update(report(metrics_of(results, prompts), duration_s, a));
  if (!a.json_path.empty()) write_json(a.json_path, j);
}

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  auto o = std::make_shared<BenchServeArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "serve",
      "An online serving benchmark against a running OpenAI-compatible server (eventide serve, vLLM, ...): "
      "--num-prompts streamed requests of random prompts sent at --request-rate, each generating exactly its "
      "output length (greedy, ignore_eos). Reports what vLLM's `bench serve` reports, defined as it defines "
      "them: TTFT (to the first streamed chunk), TPOT = (latency - TTFT) / (output tokens - 1) per request, ITL "
      "(every gap between chunks, pooled), end-to-end latency (to the last chunk), each as mean, median, p90 and "
      "p99; request, output and total token throughput over the whole run; failed requests. A first request, "
      "not counted, checks that the server serves the workload, as vLLM's does");
  cmd->add_option("--url", o->url, "the server, http://HOST:PORT")->capture_default_str();
  cmd->add_option("--endpoint", o->endpoint,
                  "completions (POST /v1/completions, the prompt as token ids) or chat (POST /v1/chat/completions, "
                  "the prompt as random words in one user message)")
      ->capture_default_str()
      ->check(CLI::IsMember({"completions", "chat"}));
  cmd->add_option("--model", o->model, "the model name requests carry; default: the id GET /v1/models reports");
  cmd->add_option("--request-rate", o->request_rate,
                  "requests per second, arriving as a Poisson process (exponential gaps), or inf: all at once")
      ->capture_default_str();
  cmd->add_option("--num-prompts", o->num_prompts, "requests to send")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--random-input-len", o->input_len, "prompt tokens per request (before --random-range-ratio)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--random-output-len", o->output_len, "tokens each request generates (before --random-range-ratio)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--random-range-ratio", o->range_ratio,
                  "lengths are drawn uniformly from [L * (1 - F), L * (1 + F)]; 0: every request has exactly L")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  cmd->add_option("--seed", o->seed, "seed of the prompts, their lengths and the arrival times")->capture_default_str();
  cmd->add_option("--max-concurrency", o->max_concurrency,
                  "requests in flight at most; one that arrives while the limit is reached waits for a free slot, and "
                  "its times start when it is sent; 0: no limit")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--vocab-size", o->vocab_size,
                  "prompt token ids are drawn below this; default: the vocab_size GET /v1/models reports (eventide "
                  "serve reports it; other servers need the flag)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", o->json_path,
                  "also write the results as JSON to this file (vLLM's key names, plus the command line, the commit "
                  "and the served model id)");
  cmd->add_option("--commit", o->commit, "commit to record in the JSON");
  cmd->callback([o] { run_bench_serve(*o); });
}

}  // namespace evt::cli
