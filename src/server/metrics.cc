#include "server/metrics.h"

#include <fmt/format.h>

namespace evt::server {

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size()) ++counts_[i];
  ++count_;
  sum_ += seconds;
}

std::string Histogram::render(const std::string& name) const {
  std::string out;
  int64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::count_outcome(const std::string& outcome) {
  std::lock_guard lock(mutex_);
  ++outcomes_[outcome];
}

void ServerMetrics::observe_ttft(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void ServerMetrics::observe_inter_token(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_.observe(seconds);
}

std::string ServerMetrics::render(const engine::EngineMetrics& e) const {
  std::string out;
  const auto gauge = [&out](const char* name, const char* help, int64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
  };
  const auto counter = [&out](const char* name, const char* help, int64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
  };
  gauge("eventide_requests_running", "Requests the engine is running.", e.running);
  gauge("eventide_requests_waiting", "Requests queued in the engine.", e.waiting);
  gauge("eventide_kv_pages_used", "KV cache pages in use.", e.kv_pages_used);
  gauge("eventide_kv_pages_total", "KV cache pages in the pool.", e.kv_pages_total);
  counter("eventide_prompt_tokens_total", "Prompt tokens of finished requests.", e.prompt_tokens);
  counter("eventide_generated_tokens_total", "Tokens generated.", e.generated_tokens);
  counter("eventide_preemptions_total", "Sequences preempted for KV pages.", e.preemptions);
  std::lock_guard lock(mutex_);
  out += "# HELP eventide_http_requests_total HTTP requests by endpoint and status.\n"
         "# TYPE eventide_http_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += fmt::format("eventide_http_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second,
                       count);
  }
  out += "# HELP eventide_generation_requests_total Completion requests by how they ended.\n"
         "# TYPE eventide_generation_requests_total counter\n";
  for (const auto& [outcome, count] : outcomes_) {
    out += fmt::format("eventide_generation_requests_total{{outcome=\"{}\"}} {}\n", outcome, count);
  }
  out += "# HELP eventide_time_to_first_token_seconds From request arrival to its first token.\n"
         "# TYPE eventide_time_to_first_token_seconds histogram\n";
  out += ttft_.render("eventide_time_to_first_token_seconds");
  out += "# HELP eventide_inter_token_latency_seconds Between consecutive tokens of a request.\n"
         "# TYPE eventide_inter_token_latency_seconds histogram\n";
  out += inter_token_.render("eventide_inter_token_latency_seconds");
  return out;
}

}  // namespace evt::server
