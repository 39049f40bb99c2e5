// Registry row of the prologue example; the bodies are in staged_add.h.

#include "kernels/examples/staged_add.h"

#include "kernels/registry.h"

namespace evt::kernels {

EVT_REGISTER_TILE_FUNCTION(staged_add, TileFunction{
    .name = "staged_add", .summary = "out = w + x, with the weight row w staged by a prologue before the wait",
    .num_reads = 2, .num_writes = 2, .cpu = run_body_on_cpu<staged_add_reference<SerialBlock>, 2, 2>,
    .device_body = "evt::kernels::staged_add_body", .device_header = "kernels/examples/staged_add.h",
    .device_prologue = "evt::kernels::staged_add_prologue", .relative_cost = 1});

}  // namespace evt::kernels
