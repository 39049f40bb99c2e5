// Registry row of the QKV projection; the body is in qkv_proj.h.

#include "kernels/llm/qkv_proj.h"

#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void qkv_proj_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x = a.reads[2], &out = a.writes[0];
  const int64_t l = a.tile[0], head = a.tile[1], ks = a.tile[2];
  const int64_t tokens = x.dim(1), hidden = x.dim(2), width = out.dim(2);
  const int64_t heads = cfg_at(cfg, kCfgHeads), kv_heads = cfg_at(cfg, kCfgKvHeads), d = cfg_at(cfg, kCfgHeadDim);
  const int64_t split = cfg_at(cfg, kCfgQkvSplitLen);
  const WeightColumn column = head < heads ? kWq : head < heads + kv_heads ? kWk : kWv;
  const int64_t first_row = (head - (head < heads ? 0 : head < heads + kv_heads ? heads : heads + kv_heads)) * d;
  const uint16_t* w = ref_weight<uint16_t>(wtab, l, column);
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<double> xn = ref_rmsnorm(x.as<const float>() + ((l % 2) * tokens + t) * hidden, hidden,
                                               ref_weight<uint16_t>(wtab, l, kWinputNorm), cfg_eps(cfg));
    for (int64_t r = 0; r < d; ++r) {
      double sum = 0;
      for (int64_t k = ks * split; k < (ks + 1) * split && k < hidden; ++k) {
        sum += bf16_to_f32(w[(first_row + r) * hidden + k]) * ref_projection_input(xn[k]);
      }
      out.as<float>()[(ks * tokens + t) * width + head * d + r] = static_cast<float>(sum);
    }
  }
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(qkv_proj, TileFunction{
    .name = "qkv_proj",
    .summary = "input RMSNorm + one head of the Q, K or V projection over one K slice, every token",
    .num_reads = 3, .num_writes = 1,
    .cpu = qkv_proj_reference,
    .device_body = "evt::kernels::llm::qkv_proj_body", .device_header = "kernels/llm/qkv_proj.h",
    .device_prologue = "evt::kernels::llm::qkv_proj_prologue",
    .relative_cost = 1});

}  // namespace evt::kernels::llm
