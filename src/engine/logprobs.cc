#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

#include "util/check.h"

namespace evt::engine {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  EVT_CHECK(chosen >= 0 && static_cast<size_t>(chosen) < logits.size()) << "token " << chosen << " of " << logits.size();
  EVT_CHECK(top_n >= 0) << top_n;
  // log softmax(x)_i = x_i - (m + log sum_j exp(x_j - m)), m the largest logit; summed in double
  // so a vocab of 150k terms loses nothing.
  const float m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - m);
  const double log_z = m + std::log(sum);
  const auto logprob = [&](int32_t id) { return static_cast<float>(logits[static_cast<size_t>(id)] - log_z); };

  // The top_n largest in one pass: a small sorted list (top_n <= 5 in practice).
  std::vector<int32_t> best;
  const auto before = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  const auto n = static_cast<size_t>(std::min<int64_t>(top_n, static_cast<int64_t>(logits.size())));
  for (int32_t id = 0; n > 0 && static_cast<size_t>(id) < logits.size(); ++id) {
    if (best.size() == n && !before(id, best.back())) continue;
    if (best.size() == n) best.pop_back();
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
  }
  TokenLogprobs out{.logprob = logprob(chosen), .top = {}};
  for (int32_t id : best) out.top.emplace_back(id, logprob(id));
  return out;
}

}  // namespace evt::engine
