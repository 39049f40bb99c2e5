#pragma once
// The server's Prometheus metrics (text exposition format 0.0.4): requests by endpoint and
// status, time to first token and inter-token latency histograms, and the engine's gauges
// (running and waiting requests, KV pages) read at scrape time. Thread-safe.

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/engine.h"

namespace evt::server {

class Histogram {
 public:
  // Upper bounds in seconds, from 1 ms to 30 s: covers a tiny CPU model and a large GPU one.
  static constexpr std::array<double, 14> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1,     2.5,  5,     10,  30};
  void observe(double seconds);
  // The _bucket, _sum and _count lines of `name`.
  std::string render(const std::string& name) const;

 private:
  std::array<int64_t, kBounds.size()> counts_{};  // per bucket, not cumulative
  int64_t count_ = 0;
  double sum_ = 0;
};

class ServerMetrics {
 public:
  void count_request(const std::string& endpoint, int status);
  // How a generation request ended: stop, length, error, disconnected or rejected.
  void count_outcome(const std::string& outcome);
  void observe_ttft(double seconds);
  void observe_inter_token(double seconds);
  std::string render(const engine::EngineMetrics& engine) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::map<std::string, int64_t> outcomes_;
  Histogram ttft_, inter_token_;
};

}  // namespace evt::server
