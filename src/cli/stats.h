#pragma once
// Order statistics of timed repetitions, as the benchmarks and generate report them.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace evt::cli {

// The q-quantile by nearest rank (0 for no samples); q = 0.5 is the element at size / 2.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

inline double median(std::vector<double> v) { return percentile(std::move(v), 0.5); }

}  // namespace evt::cli
