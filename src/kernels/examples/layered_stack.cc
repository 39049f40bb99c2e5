// Registry rows of the layered residual stack; the bodies are in layered_stack.h.

#include "kernels/examples/layered_stack.h"

#include "kernels/registry.h"

namespace evt::kernels {

EVT_REGISTER_TILE_FUNCTION(stack_seed, TileFunction{
    .name = "stack_seed",
    .summary = "layered stack: copies input row i into layer 0",
    .num_reads = 1, .num_writes = 1,
    .cpu = run_body_on_cpu<stack_seed_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::stack_seed_body", .device_header = "kernels/examples/layered_stack.h",
    .relative_cost = 0.25});
EVT_REGISTER_TILE_FUNCTION(stack_layer, TileFunction{
    .name = "stack_layer",
    .summary = "layered stack: row i of layer l+1 is row i of layer l plus the mean of layer l's first column",
    .num_reads = 1, .num_writes = 1,
    .cpu = run_body_on_cpu<stack_layer_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::stack_layer_body", .device_header = "kernels/examples/layered_stack.h",
    .relative_cost = 1});
EVT_REGISTER_TILE_FUNCTION(stack_head, TileFunction{
    .name = "stack_head",
    .summary = "layered stack: y[i] is the sum of row i of the last layer",
    .num_reads = 1, .num_writes = 1,
    .cpu = run_body_on_cpu<stack_head_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::stack_head_body", .device_header = "kernels/examples/layered_stack.h",
    .relative_cost = 0.25});

}  // namespace evt::kernels
