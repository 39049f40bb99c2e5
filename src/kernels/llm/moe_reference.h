#pragma once
// Host helpers of the MoE tile functions' naive CPU references (moe_*.cc).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace evt::kernels::llm {

// The expert whose tile range [ptr[e], ptr[e + 1]) holds tile i, or -1: a plain scan, not the
// plan's search (moe_tile_expert).
inline int64_t ref_tile_expert(const int32_t* ptr, int64_t experts, int64_t i) {
  for (int64_t e = 0; e < experts; ++e) {
    if (ptr[e] <= i && i < ptr[e + 1]) return e;
  }
  return -1;
}

struct RefRoute {
  int64_t expert;
  double weight;
};

// transformers' Qwen3MoeTopKRouter from a token's router logits: softmax, the top_k most probable
// experts, their probabilities renormalized to sum to 1 when norm_topk_prob. In double, as one
// division: exp(z - top) over the sum of the chosen experts' exps (in the order chosen), or over
// every expert's (in expert order) without norm_topk_prob. Equal probabilities go to the lower
// expert index; torch.topk leaves their order unspecified (on the CPU it is not by index), and
// with real-valued logits an exact tie does not happen in practice.
template <typename Logit>
std::vector<RefRoute> ref_route(const Logit* logits, int64_t experts, int64_t top_k, bool norm_topk_prob) {
  std::vector<double> ex(logits, logits + experts);
  const double top = *std::max_element(ex.begin(), ex.end());
  for (double& p : ex) p = std::exp(p - top);
  std::vector<int64_t> order(ex.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ex[a] > ex[b]; });
  std::vector<RefRoute> chosen;
  for (int64_t s = 0; s < top_k; ++s) chosen.push_back({order[s], ex[order[s]]});
  double sum = 0;
  if (norm_topk_prob) {
    for (const RefRoute& r : chosen) sum += r.weight;
  } else {
    sum = std::accumulate(ex.begin(), ex.end(), 0.0);
  }
  for (RefRoute& r : chosen) r.weight /= sum;
  return chosen;
}

}  // namespace evt::kernels::llm
