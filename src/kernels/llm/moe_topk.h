#pragma once
// MoE routing of one token from its router logits (docs/moe_decode.md), as transformers'
// Qwen3MoeTopKRouter: softmax, the top_k most probable experts (ties to the lower index), their
// probabilities renormalized to sum to 1 when kCfgMoeNormTopk. In double, in the order the
// reference sums, so a body and its reference given the same logits agree bit for bit. A dense
// layer routes every token to its one "expert" 0 with weight 1.
//   reads (cfg, wtab, router_logits: T x XE f32), writes (route_ids: T x XK i32, route_w: T x XK f32);
//   slots past top_k get id -1 and weight 0.

#include <cmath>

#include "kernels/llm/decode_config.h"
#include "kernels/llm/moe_layout.h"

namespace evt::kernels::llm {

// Thread 0 picks the experts and sums the softmax's denominator, from the block's scratch
// (1 + XE doubles, then XE floats), into which every thread first copies a share of the logits and
// then computes a share of the exps: on one thread, the 128 double exps took 47 us and the pass
// over the logits in global memory, whose loads its branches serialize, 20 us.
template <class Block>
EVT_HD void moe_topk_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int32_t* cfg = reads[0].as<const int32_t>();
  const int64_t l = tile[0], t = tile[1], width = reads[2].dim(1), slots = writes[0].dim(1);
  int32_t* ids = writes[0].as<int32_t>() + t * slots;
  float* w = writes[1].as<float>() + t * slots;
  if (b.thread() == 0) {
    for (int64_t s = 0; s < slots; ++s) {
      ids[s] = -1;
      w[s] = 0;
    }
  }
  if (weight<uint16_t>(reads[1], l, kWrouter) == nullptr) {
    if (b.thread() == 0) {
      ids[0] = 0;
      w[0] = 1;
    }
    return;
  }
  const float* z = reads[2].as<const float>() + t * width;
  const int64_t experts = cfg[kCfgMoeExperts], top_k = cfg[kCfgMoeTopK];
  double* ex = reinterpret_cast<double*>(b.scratch().data);  // the top logit, then exp(z[e] - top)
  float* zs = reinterpret_cast<float*>(ex + 1 + experts);    // the logits
  for (int64_t e = b.thread(); e < experts; e += b.threads()) zs[e] = z[e];
  b.sync();
  // One pass keeps the top_k largest logits so far, sorted (logit descending, index ascending:
  // a later equal logit ranks after), by insertion; exp is monotonic, so this is the
  // probabilities' order.
  float best_z[kMaxMoeTopK] = {};
  int32_t best_e[kMaxMoeTopK] = {};
  if (b.thread() == 0) {
    int64_t n = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const float v = zs[e];
      if (n == top_k && !(v > best_z[n - 1])) continue;
      int64_t at = n < top_k ? n++ : n - 1;
      for (; at > 0 && v > best_z[at - 1]; --at) {
        best_z[at] = best_z[at - 1];
        best_e[at] = best_e[at - 1];
      }
      best_z[at] = v;
      best_e[at] = static_cast<int32_t>(e);
    }
    ex[0] = best_z[0];
  }
  b.sync();
  const double top = ex[0];
  for (int64_t e = b.thread(); e < experts; e += b.threads()) ex[1 + e] = exp(static_cast<double>(zs[e]) - top);
  b.sync();
  if (b.thread() != 0) return;
  double sum = 0;  // in expert order, as the reference sums
  for (int64_t e = 0; e < experts; ++e) sum += ex[1 + e];
  for (int64_t s = 0; s < top_k; ++s) ids[s] = best_e[s];
  double chosen = 0;
  for (int64_t s = 0; s < top_k; ++s) chosen += ex[1 + best_e[s]] / sum;
  for (int64_t s = 0; s < top_k; ++s) {
    const double p = ex[1 + best_e[s]] / sum;
    w[s] = static_cast<float>(cfg[kCfgMoeNormTopk] != 0 ? p / chosen : p);
  }
}

}  // namespace evt::kernels::llm
