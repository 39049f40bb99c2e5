#pragma once
// Statistics of timed repetitions and latencies, as the benchmarks and generate report them.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace evt::cli {

// The q-quantile by nearest rank (0 for no samples); q = 0.5 is the element at size / 2.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

inline double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

// The q-quantile interpolated linearly between the closest ranks, numpy.percentile's default,
// which vLLM's `bench serve` reports (0 for no samples); q = 0.5 is numpy.median.
inline double percentile_interpolated(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = q * static_cast<double>(v.size() - 1);
  const auto below = static_cast<size_t>(rank);
  const size_t above = std::min(below + 1, v.size() - 1);
  return v[below] + (rank - static_cast<double>(below)) * (v[above] - v[below]);
}

inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The population standard deviation, numpy.std's default (0 for no samples).
inline double stddev(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const double m = mean(v);
  double sum = 0;
  for (double x : v) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(v.size()));
}

}  // namespace evt::cli
