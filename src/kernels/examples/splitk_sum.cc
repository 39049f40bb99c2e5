// Registry rows of the split-K example; the bodies are in splitk_sum.h.

#include "kernels/examples/splitk_sum.h"

#include "kernels/registry.h"

namespace evt::kernels {

EVT_REGISTER_TILE_FUNCTION(partial_sum, TileFunction{
    .name = "partial_sum",
    .summary = "split-K partial row sums of a 32-row block over one column block",
    .num_reads = 1, .num_writes = 1,
    .cpu = run_body_on_cpu<partial_sum_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::partial_sum_body", .device_header = "kernels/examples/splitk_sum.h",
    .relative_cost = 1});
EVT_REGISTER_TILE_FUNCTION(final_sum, TileFunction{
    .name = "final_sum",
    .summary = "sum of the split-K partials of a 32-row block",
    .num_reads = 1, .num_writes = 1,
    .cpu = run_body_on_cpu<final_sum_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::final_sum_body", .device_header = "kernels/examples/splitk_sum.h",
    .relative_cost = 0.25});

}  // namespace evt::kernels
