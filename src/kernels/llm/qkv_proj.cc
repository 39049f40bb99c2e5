// Registry row of the QKV projection; the body is in qkv_proj.h.

#include "kernels/llm/qkv_proj.h"

#include <algorithm>

#include "kernels/llm/gemv_task_row.h"
#include "kernels/llm/reference_math.h"
#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void qkv_proj_reference(const TileArgs& a) {
  const BufferView &cfg = a.reads[0], &wtab = a.reads[1], &x = a.reads[2], &out = a.writes[0];
  const int64_t l = a.tile[0], head = a.tile[1], ks = a.tile[2];
  const int64_t tokens = x.dim(1), hidden = x.dim(2), width = out.dim(2);
  const int64_t d = cfg_at(cfg, kCfgHeadDim), split = cfg_at(cfg, kCfgQkvSplitLen);
  const TiledMatrix w = ref_tiled(wtab, l, kWqkv, width, hidden, d);
  for (int64_t t = 0; t < tokens; ++t) {
    const RefNormedInput xn = ref_normed_input(x.as<const uint16_t>() + ((l % 2) * tokens + t) * hidden, hidden,
                                               ref_weight<uint16_t>(wtab, l, kWinputNorm), cfg_eps(cfg));
    for (int64_t r = head * d; r < (head + 1) * d; ++r) {
      const double sum = xn.dot(w, r, std::min(ks * split, hidden), std::min((ks + 1) * split, hidden));
      out.as<float>()[(ks * tokens + t) * width + r] = static_cast<float>(sum);
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
    .device_stream = "evt::kernels::llm::qkv_proj_stream",
    .device_task = "evt::kernels::llm::qkv_proj_task", .shared = gemv_shared_task(),
    .relative_cost = 1});

}  // namespace evt::kernels::llm
