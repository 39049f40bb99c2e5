// Registry rows of qkv_finish, one per compiled head dim; the body is in qkv_finish.h.

#include "kernels/llm/qkv_finish.h"

#include <cmath>

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

// Head dim independent: D comes from q's shape.
void qkv_finish_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &p = a.reads[2], &inv_freq = a.reads[3];
  const BufferView &pos = a.reads[4], &seq = a.reads[5], &table = a.reads[6];
  const int64_t l = a.tile[0], head = a.tile[1];
  const int64_t splits = p.dim(0), tokens = p.dim(1), width = p.dim(2), d = a.writes[0].dim(2);
  const int64_t heads = cfg_at(cfg, kCfgHeads), kv_heads = cfg_at(cfg, kCfgKvHeads);
  const bool is_q = head < heads, is_k = !is_q && head < heads + kv_heads;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> v(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) {
      double sum = 0;
      for (int64_t ks = 0; ks < splits; ++ks) sum += p.as<const float>()[(ks * tokens + t) * width + head * d + i];
      v[i] = static_cast<float>(sum);
    }
    if (cfg_at(cfg, kCfgQkNorm) != 0 && (is_q || is_k)) {
      const std::vector<double> n = ref_rmsnorm(v.data(), d, ref_weight<uint16_t>(wtab, l, is_q ? kWqNorm : kWkNorm),
                                                cfg_eps(cfg));
      for (int64_t i = 0; i < d; ++i) v[i] = static_cast<float>(n[i]);
    }
    const int64_t position = pos.as<const int32_t>()[t];
    if (is_q || is_k) {
      std::vector<float> r(v);
      for (int64_t i = 0; i < d / 2; ++i) {
        const double angle = static_cast<float>(position) * inv_freq.as<const float>()[i];
        r[i] = static_cast<float>(v[i] * std::cos(angle) - v[i + d / 2] * std::sin(angle));
        r[i + d / 2] = static_cast<float>(v[i + d / 2] * std::cos(angle) + v[i] * std::sin(angle));
      }
      v = r;
    }
    if (is_q) {
      for (int64_t i = 0; i < d; ++i) a.writes[0].as<float>()[(t * heads + head) * d + i] = v[i];
      continue;
    }
    const int64_t page_size = cfg_at(cfg, kCfgPageSize);
    const int64_t page = table.as<const int32_t>()[seq.as<const int32_t>()[t] * table.dim(1) + position / page_size];
    const int64_t slot = page * page_size + position % page_size;
    const BufferView& cache = a.writes[is_k ? 1 : 2];
    const int64_t kv_head = is_k ? head - heads : head - heads - kv_heads;
    for (int64_t i = 0; i < d; ++i) {
      cache.as<uint16_t>()[((l * cache.dim(1) + slot) * kv_heads + kv_head) * d + i] = f32_to_bf16(v[i]);
    }
  }
}

TileFunction qkv_finish_row(int d, const char* body) {
  return TileFunction{
      .name = "qkv_finish_d" + std::to_string(d),
      .summary = "one head, every token: sum the K splits, q/k RMSNorm, RoPE; q to q, k and v into the paged cache",
      .num_reads = 7, .num_writes = 3,
      .cpu = qkv_finish_reference,
      .device_body = body, .device_header = "kernels/llm/qkv_finish.h",
      .relative_cost = 0.2};
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(qkv_finish_d64, qkv_finish_row(64, "evt::kernels::llm::qkv_finish_d64_body"));
EVT_REGISTER_TILE_FUNCTION(qkv_finish_d128, qkv_finish_row(128, "evt::kernels::llm::qkv_finish_d128_body"));

}  // namespace evt::kernels::llm
