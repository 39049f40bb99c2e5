// Registry row of greedy argmax; the body is in argmax.h.

#include "kernels/llm/argmax.h"

#include <cmath>

#include "kernels/registry.h"

namespace evt::kernels::llm {
namespace {

void argmax_reference(const TileArgs& a) {
  const int64_t s = a.tile[0], vocab = a.reads[0].dim(1);
  const float* row = a.reads[0].as<const float>() + s * vocab;
  // The first NaN if there is one (torch.argmax's answer), else the first maximum.
  int64_t best = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(row[i])) {
      best = i;
      break;
    }
    if (row[i] > row[best]) best = i;
  }
  a.writes[0].as<int32_t>()[s] = static_cast<int32_t>(best);
}

}  // namespace

EVT_REGISTER_TILE_FUNCTION(argmax, TileFunction{
    .name = "argmax",
    .summary = "greedy sampling: the index of one row's largest logit (lowest index on a tie)",
    .num_reads = 1, .num_writes = 1,
    .cpu = argmax_reference,
    .device_body = "evt::kernels::llm::argmax_body", .device_header = "kernels/llm/argmax.h",
    .relative_cost = 0.2});

}  // namespace evt::kernels::llm
