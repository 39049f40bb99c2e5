// Registry rows of decode attention, one per compiled head dim; the body is in decode_attention.h.

#include "kernels/llm/decode_attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

// Token t of tile (l, run, h, s). Head dim independent: D comes from cfg.
void attend_token(const TileArgs& a, int64_t t) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &p_qkv = a.reads[2], &inv_freq = a.reads[3];
  const BufferView &q_in = a.reads[4], &kc = a.reads[5], &vc = a.reads[6];
  const BufferView &pos = a.reads[7], &seq = a.reads[8], &table = a.reads[9];
  const int64_t l = a.tile[0], h = a.tile[2], s = a.tile[3];
  const int64_t tokens = p_qkv.dim(1), d = cfg_at(cfg, kCfgHeadDim), heads = cfg_at(cfg, kCfgHeads);
  const int64_t kv_heads = kc.dim(2);
  const int64_t group = heads / kv_heads, split = cfg_at(cfg, kCfgKvSplitLen);
  const int64_t position = pos.as<const int32_t>()[t], kv_len = position + 1;
  const int64_t p0 = std::min(s * split, kv_len), p1 = std::min(p0 + split, kv_len);
  const int64_t sequence = seq.as<const int32_t>()[t];
  // A decode step: q comes from the projection's partial sums, and the split that holds the
  // token's own position takes its k and v from there too, appending them to the cache.
  const bool finishes = cfg_at(cfg, kCfgAttentionFinishes) != 0;
  const bool appends = finishes && p0 < p1 && p1 == kv_len;
  std::vector<double> own[2];  // k, v of the own position, as the cache holds them
  if (appends) {
    const int64_t slot = ref_kv_slot(cfg, table, sequence, position);
    for (int kv = 0; kv < 2; ++kv) {
      const std::vector<float> x = ref_qkv_head(cfg, wtab, p_qkv, inv_freq, l, t, heads + kv * kv_heads + h, position);
      uint16_t* row = a.writes[2 + kv].as<uint16_t>() + ref_kv_row(a.writes[2 + kv], l, slot, h);
      for (int64_t i = 0; i < d; ++i) {
        row[i] = f32_to_bf16(x[i]);
        own[kv].push_back(bf16_to_f32(row[i]));
      }
    }
  }
  // Element i of position p's key (kv = 0) or value (1).
  auto cached = [&](int kv, int64_t p, int64_t i) {
    if (appends && p == position) return own[kv][i];
    const BufferView& cache = kv == 0 ? kc : vc;
    const int64_t slot = ref_kv_slot(cfg, table, sequence, p);
    return static_cast<double>(bf16_to_f32(cache.as<const uint16_t>()[ref_kv_row(cache, l, slot, h) + i]));
  };
  for (int64_t g = 0; g < group; ++g) {
    const int64_t hq = h * group + g;
    const std::vector<float> q =
        finishes ? ref_qkv_head(cfg, wtab, p_qkv, inv_freq, l, t, hq, position)
                 : std::vector<float>(q_in.as<const float>() + (t * heads + hq) * d, q_in.as<const float>() + (t * heads + hq + 1) * d);
    std::vector<double> scores;
    for (int64_t p = p0; p < p1; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * cached(0, p, i);
      scores.push_back(dot / std::sqrt(static_cast<double>(d)));
    }
    double max = -std::numeric_limits<double>::infinity(), sum = 0;
    for (double sc : scores) max = std::max(max, sc);
    std::vector<double> out(static_cast<size_t>(d), 0.0);
    for (int64_t p = p0; p < p1; ++p) {
      const double e = std::exp(scores[p - p0] - max);
      sum += e;
      for (int64_t i = 0; i < d; ++i) out[i] += e * cached(1, p, i);
    }
    // One split: the output in bf16, as o_proj stages it; several: each split's, for the merge.
    if (a.writes[0].dim(0) == 1) {
      uint16_t* attn = a.writes[4].as<uint16_t>() + (t * heads + hq) * d;
      for (int64_t i = 0; i < d; ++i) attn[i] = f32_to_bf16(sum > 0 ? static_cast<float>(out[i] / sum) : 0.0f);
      continue;
    }
    float* o = a.writes[0].as<float>() + ((s * tokens + t) * heads + hq) * d;
    for (int64_t i = 0; i < d; ++i) o[i] = sum > 0 ? static_cast<float>(out[i] / sum) : 0.0f;
    float* ml = a.writes[1].as<float>() + ((s * tokens + t) * heads + hq) * 2;
    ml[0] = static_cast<float>(max);
    ml[1] = static_cast<float>(sum);
  }
}

// The tile's run of tokens (decode_config.h).
void decode_attention_reference(const TileArgs& a) {
  const int64_t tokens = a.reads[7].dim(0);
  const auto runs = static_cast<int32_t>(cfg_at(a.reads[0], kCfgAttentionRuns));
  for (int64_t t = a.tile[1]; t < tokens; t += attention_run_stride(runs, tokens)) attend_token(a, t);
}

TileFunction decode_attention_row(int d, const char* body) {
  return TileFunction{
      .name = "decode_attention_d" + std::to_string(d),
      .summary = "a run of tokens, one KV head's query heads, one KV split of the paged cache: normalized output, max and "
                 "sum (with one split, the output in bf16); in a decode step q, k and v finished from the QKV partial "
                 "sums and the own k and v appended",
      .num_reads = 10, .num_writes = 5,
      .cpu = decode_attention_reference,
      .device_body = body, .device_header = "kernels/llm/decode_attention.h",
      .relative_cost = 0.5};
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(decode_attention_d64, decode_attention_row(64, "evt::kernels::llm::decode_attention_d64_body"));
EVT_REGISTER_TILE_FUNCTION(decode_attention_d128,
                           decode_attention_row(128, "evt::kernels::llm::decode_attention_d128_body"));

}  // namespace evt::kernels::llm
