// Registry rows of decode attention, one per compiled head dim; the body is in decode_attention.h.

#include "kernels/llm/decode_attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

// Head dim independent: D comes from q's shape.
void decode_attention_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &q = a.reads[1], &kc = a.reads[2], &vc = a.reads[3];
  const BufferView &pos = a.reads[4], &seq = a.reads[5], &table = a.reads[6];
  const int64_t l = a.tile[0], t = a.tile[1], h = a.tile[2], s = a.tile[3];
  const int64_t tokens = q.dim(0), heads = q.dim(1), d = q.dim(2), slots = kc.dim(1), kv_heads = kc.dim(2);
  const int64_t group = heads / kv_heads, page_size = cfg_at(cfg, kCfgPageSize), split = cfg_at(cfg, kCfgKvSplitLen);
  const int64_t kv_len = pos.as<const int32_t>()[t] + 1;
  const int64_t p0 = std::min(s * split, kv_len), p1 = std::min(p0 + split, kv_len);
  const int32_t* pages = table.as<const int32_t>() + seq.as<const int32_t>()[t] * table.dim(1);
  for (int64_t g = 0; g < group; ++g) {
    const int64_t hq = h * group + g;
    const float* qr = q.as<const float>() + (t * heads + hq) * d;
    std::vector<double> scores;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t slot = static_cast<int64_t>(pages[p / page_size]) * page_size + p % page_size;
      const uint16_t* kr = kc.as<const uint16_t>() + ((l * slots + slot) * kv_heads + h) * d;
      double dot = 0;
      for (int64_t i = 0; i < d; ++i) dot += static_cast<double>(qr[i]) * bf16_to_f32(kr[i]);
      scores.push_back(dot / std::sqrt(static_cast<double>(d)));
    }
    double max = -std::numeric_limits<double>::infinity(), sum = 0;
    for (double sc : scores) max = std::max(max, sc);
    std::vector<double> out(static_cast<size_t>(d), 0.0);
    for (int64_t p = p0; p < p1; ++p) {
      const double e = std::exp(scores[p - p0] - max);
      sum += e;
      const int64_t slot = static_cast<int64_t>(pages[p / page_size]) * page_size + p % page_size;
      const uint16_t* vr = vc.as<const uint16_t>() + ((l * slots + slot) * kv_heads + h) * d;
      for (int64_t i = 0; i < d; ++i) out[i] += e * bf16_to_f32(vr[i]);
    }
    float* o = a.writes[0].as<float>() + ((s * tokens + t) * heads + hq) * d;
    for (int64_t i = 0; i < d; ++i) o[i] = sum > 0 ? static_cast<float>(out[i] / sum) : 0.0f;
    float* ml = a.writes[1].as<float>() + ((s * tokens + t) * heads + hq) * 2;
    ml[0] = static_cast<float>(max);
    ml[1] = static_cast<float>(sum);
  }
}

TileFunction decode_attention_row(int d, const char* body) {
  return TileFunction{
      .name = "decode_attention_d" + std::to_string(d),
      .summary = "one token, one KV head's query heads, one KV split of the paged cache: normalized output, max and sum",
      .num_reads = 7, .num_writes = 2,
      .cpu = decode_attention_reference,
      .device_body = body, .device_header = "kernels/llm/decode_attention.h",
      .relative_cost = 0.5};
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(decode_attention_d64, decode_attention_row(64, "evt::kernels::llm::decode_attention_d64_body"));
EVT_REGISTER_TILE_FUNCTION(decode_attention_d128,
                           decode_attention_row(128, "evt::kernels::llm::decode_attention_d128_body"));

}  // namespace evt::kernels::llm
