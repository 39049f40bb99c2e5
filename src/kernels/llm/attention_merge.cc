// Registry row of the attention merge; the body is in attention_merge.h.

#include "kernels/llm/attention_merge.h"

#include <cmath>
#include <limits>

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void attention_merge_reference(const TileArgs& a) {
  const BufferView &o = a.reads[1], &ml = a.reads[2];
  const int64_t t = a.tile[1], splits = o.dim(0), tokens = o.dim(1), heads = o.dim(2), d = o.dim(3);
  const int64_t group = heads / cfg_at(a.reads[0], kCfgKvHeads);
  if (splits == 1) return;  // attention wrote attn
  for (int64_t hq = a.tile[2] * group; hq < (a.tile[2] + 1) * group; ++hq) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t s = 0; s < splits; ++s) {
      max = std::max<double>(max, ml.as<const float>()[((s * tokens + t) * heads + hq) * 2]);
    }
    for (int64_t i = 0; i < d; ++i) {
      double num = 0, den = 0;
      for (int64_t s = 0; s < splits; ++s) {
        const float* state = ml.as<const float>() + ((s * tokens + t) * heads + hq) * 2;
        if (state[1] == 0) continue;
        const double w = state[1] * std::exp(state[0] - max);
        num += w * o.as<const float>()[((s * tokens + t) * heads + hq) * d + i];
        den += w;
      }
      a.writes[0].as<uint16_t>()[(t * heads + hq) * d + i] = f32_to_bf16(den > 0 ? static_cast<float>(num / den) : 0.0f);
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(attention_merge, TileFunction{
    .name = "attention_merge",
    .summary = "one token, one KV head: merge the KV splits' attention outputs of its query heads by their softmax max "
               "and sum (nothing with one split: attention wrote its output)",
    .num_reads = 3, .num_writes = 1,
    .cpu = attention_merge_reference,
    .device_body = "evt::kernels::llm::attention_merge_body", .device_header = "kernels/llm/attention_merge.h",
    .relative_cost = 0.1});

}  // namespace evt::kernels::llm
