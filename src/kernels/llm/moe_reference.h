#pragma once
// Host helpers of the MoE tile functions' naive CPU references (moe_*.cc).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace evt::kernels::llm {

// The expert whose tile range [ptr[e], ptr[e + 1]) holds tile i, or -1: a plain scan, not the
// bodies' search (moe_tile_expert).
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
// experts, their probabilities renormalized to sum to 1 when norm_topk_prob. In double. Equal
// probabilities go to the lower expert index; torch.topk leaves their order unspecified (on the
// CPU it is not by index), and with real-valued logits an exact tie does not happen in practice.
template <typename Logit>
std::vector<RefRoute> ref_route(const Logit* logits, int64_t experts, int64_t top_k, bool norm_topk_prob) {
  std::vector<double> prob(logits, logits + experts);
  const double top = *std::max_element(prob.begin(), prob.end());
  double sum = 0;
  for (double& p : prob) sum += (p = std::exp(p - top));
  for (double& p : prob) p /= sum;
  std::vector<int64_t> order(prob.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return prob[a] > prob[b]; });
  std::vector<RefRoute> chosen;
  double chosen_sum = 0;
  for (int64_t s = 0; s < top_k; ++s) {
    chosen.push_back({order[s], prob[order[s]]});
    chosen_sum += prob[order[s]];
  }
  if (norm_topk_prob) {
    for (RefRoute& r : chosen) r.weight /= chosen_sum;
  }
  return chosen;
}

}  // namespace evt::kernels::llm
