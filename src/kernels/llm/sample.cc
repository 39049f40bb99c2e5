// Registry row of sampling; the body and the rules it follows are in sample.h. The reference
// applies those rules the plain way, sorting the row where the body runs radix selects; it shares
// with the body only sample_math.h's arithmetic.

#include "kernels/llm/sample.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

// The first NaN if there is one, else the first maximum.
int64_t reference_greedy(const std::vector<float>& a) {
  int64_t best = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(a.size()); ++i) {
    if (std::isnan(a[i])) return i;
    if (a[i] > a[best]) best = i;
  }
  return best;
}

// The largest value v of `sorted` (descending) at which the masses of the values >= v, counting
// only those >= tau_k, reach top_p's share of them all.
float reference_top_p(const std::vector<float>& sorted, float tau_k, float top_p) {
  const float m = sorted.front();
  auto mass = [&](float v) { return v >= tau_k ? top_p_mass(v, m) : 0; };
  uint64_t total = 0;
  for (float v : sorted) total += mass(v);
  const uint64_t target = top_p_target(top_p, total);
  uint64_t sum = 0;
  for (float v : sorted) {
    sum += mass(v);
    if (sum >= target) return v;
  }
  return -INFINITY;  // not reached: the masses of all values sum to total >= target
}

int64_t reference_draw(const std::vector<float>& a, const SampleParams& p) {
  const int64_t vocab = static_cast<int64_t>(a.size());
  std::vector<float> z(a.size()), sorted;
  for (int64_t i = 0; i < vocab; ++i) {
    z[i] = a[i] / p.temperature;
    if (!std::isnan(z[i])) sorted.push_back(z[i]);
  }
  if (sorted.empty()) return 0;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  const float m = sorted.front();
  const float tau_k = top_k_on(p, vocab) && static_cast<int64_t>(sorted.size()) >= p.top_k ? sorted[p.top_k - 1]
                                                                                             : -INFINITY;
  const float tau_p = top_p_on(p) ? reference_top_p(sorted, tau_k, p.top_p) : -INFINITY;
  const float tau_m = min_p_on(p) ? min_p_threshold(m, p.min_p) : -INFINITY;
  const float tau = std::max({tau_k, tau_p, tau_m});
  const uint64_t stream = draw_stream(p.seed, p.counter);
  int64_t best = -1;
  float best_score = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(z[i] >= tau)) continue;
    const float score = z[i] + gumbel(stream, i);
    if (best < 0 || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

void sample_reference(const TileArgs& args) {
  const int64_t s = args.tile[0], vocab = args.reads[0].dim(1);
  const float* logits = args.reads[0].as<const float>() + s * vocab;
  const SampleParams p = unpack_sample_row(args.reads[1].as<const int32_t>() + s * kSampleWords);
  const int32_t* pen_start = args.reads[2].as<const int32_t>();
  const int32_t* pen = args.reads[3].as<const int32_t>();
  std::vector<float> a(logits, logits + vocab);
  for (int64_t e = pen_start[s]; e < pen_start[s + 1]; ++e) {
    const int32_t token = pen[2 * e], count = pen[2 * e + 1];
    if (token >= 0 && token < vocab) a[token] -= penalty(p, count);
  }
  const int64_t next = is_greedy(p) ? reference_greedy(a) : reference_draw(a, p);
  args.writes[0].as<int32_t>()[s] = static_cast<int32_t>(next);
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(sample, TileFunction{
    .name = "sample",
    .summary = "sampling: one row's next token by penalties, temperature, top-k, top-p and min-p (greedy at 0)",
    .num_reads = 5, .num_writes = 2,
    .cpu = sample_reference,
    .device_body = "evt::kernels::llm::sample_body", .device_header = "kernels/llm/sample.h",
    // Greedy costs argmax's one pass; a draw up to ~11 passes over the row (two radix selects).
    .relative_cost = 1});

}  // namespace evt::kernels::llm
