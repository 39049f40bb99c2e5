// Registry rows of qkv_finish, one per compiled head dim; the body is in qkv_finish.h.

#include "kernels/llm/qkv_finish.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

// Head dim independent: D comes from cfg.
void qkv_finish_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &p = a.reads[2], &inv_freq = a.reads[3];
  const BufferView &pos = a.reads[4], &seq = a.reads[5], &table = a.reads[6];
  const int64_t d = cfg_at(cfg, kCfgHeadDim), heads = cfg_at(cfg, kCfgHeads), kv_heads = cfg_at(cfg, kCfgKvHeads);
  const int64_t tokens = p.dim(1), per = cfg_at(cfg, kCfgFinishPairs), l = a.tile[0], first = a.tile[1] * per;
  for (int64_t pair = first; pair < std::min(first + per, (heads + 2 * kv_heads) * tokens); ++pair) {
    const int64_t head = pair / tokens, t = pair % tokens;
    const bool is_q = head < heads, is_k = !is_q && head < heads + kv_heads;
    const int64_t position = pos.as<const int32_t>()[t];
    const std::vector<float> v = ref_qkv_head(cfg, wtab, p, inv_freq, l, t, head, position);
    if (is_q) {
      std::copy(v.begin(), v.end(), a.writes[0].as<float>() + (t * heads + head) * d);
      continue;
    }
    const BufferView& cache = a.writes[is_k ? 1 : 2];
    const int64_t slot = ref_kv_slot(cfg, table, seq.as<const int32_t>()[t], position);
    uint16_t* row = cache.as<uint16_t>() + ref_kv_row(cache, l, slot, head - heads - (is_k ? 0 : kv_heads));
    for (int64_t i = 0; i < d; ++i) row[i] = f32_to_bf16(v[i]);
  }
}

TileFunction qkv_finish_row(int d, const char* body) {
  return TileFunction{
      .name = "qkv_finish_d" + std::to_string(d),
      .summary = "(head, token) pairs: sum the K splits, q/k RMSNorm, RoPE; q to q, k and v into the paged cache",
      .num_reads = 7, .num_writes = 3,
      .cpu = qkv_finish_reference,
      .device_body = body, .device_header = "kernels/llm/qkv_finish.h",
      .relative_cost = 0.2};
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(qkv_finish_d64, qkv_finish_row(64, "evt::kernels::llm::qkv_finish_d64_body"));
EVT_REGISTER_TILE_FUNCTION(qkv_finish_d128, qkv_finish_row(128, "evt::kernels::llm::qkv_finish_d128_body"));

}  // namespace evt::kernels::llm
