// Registry rows of the scheduling-benchmark tiles.

#include "kernels/bench/sched_bodies.h"

#include "kernels/registry.h"

namespace evt::kernels {

EVT_REGISTER_TILE_FUNCTION(empty, TileFunction{
    .name = "empty", .summary = "does nothing: measures scheduling alone",
    .num_reads = 0, .num_writes = 0, .cpu = run_body_on_cpu<empty_body<SerialBlock>, 0, 0>,
    .device_body = "evt::kernels::empty_body", .device_header = "kernels/bench/sched_bodies.h", .relative_cost = 0.1});
EVT_REGISTER_TILE_FUNCTION(chain_step, TileFunction{
    .name = "chain_step", .summary = "out[t] = in[t] + in[(t+1) % T]: one small step of a dependent chain",
    .num_reads = 1, .num_writes = 1, .cpu = run_body_on_cpu<chain_step_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::chain_step_body", .device_header = "kernels/bench/sched_bodies.h",
    .relative_cost = 0.2});

}  // namespace evt::kernels
