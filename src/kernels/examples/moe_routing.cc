// Registry rows of the routed-MoE example; the bodies are in moe_routing.h.

#include "kernels/examples/moe_routing.h"

#include "kernels/registry.h"

namespace evt::kernels {

namespace {
constexpr const char* kHeader = "kernels/examples/moe_routing.h";
}

EVT_REGISTER_TILE_FUNCTION(moe_route, TileFunction{
    .name = "moe_route", .summary = "router logits and top-k for one token",
    .num_reads = 2, .num_writes = 2, .cpu = run_body_on_cpu<moe_route_body<SerialBlock>, 2, 2>,
    .device_body = "evt::kernels::moe_route_body", .device_header = kHeader, .relative_cost = 1});
EVT_REGISTER_TILE_FUNCTION(moe_count, TileFunction{
    .name = "moe_count", .summary = "per-expert counts, tile offsets and row placement; sets expert wait counts",
    .num_reads = 1, .num_writes = 3, .cpu = run_body_on_cpu<moe_count_body<SerialBlock>, 1, 3>,
    .device_body = "evt::kernels::moe_count_body", .device_header = kHeader, .relative_cost = 4});
EVT_REGISTER_TILE_FUNCTION(moe_gather, TileFunction{
    .name = "moe_gather", .summary = "copies a token's row to its expert-sorted positions",
    .num_reads = 2, .num_writes = 1, .cpu = run_body_on_cpu<moe_gather_body<SerialBlock>, 2, 1>,
    .device_body = "evt::kernels::moe_gather_body", .device_header = kHeader, .relative_cost = 0.5});
EVT_REGISTER_TILE_FUNCTION(moe_expert, TileFunction{
    .name = "moe_expert", .summary = "one expert's GEMM over a tile of its routed rows",
    .num_reads = 4, .num_writes = 1, .cpu = run_body_on_cpu<moe_expert_body<SerialBlock>, 4, 1>,
    .device_body = "evt::kernels::moe_expert_body", .device_header = kHeader, .relative_cost = 4});
EVT_REGISTER_TILE_FUNCTION(moe_combine, TileFunction{
    .name = "moe_combine", .summary = "weighted sum of a token's expert outputs",
    .num_reads = 3, .num_writes = 1, .cpu = run_body_on_cpu<moe_combine_body<SerialBlock>, 3, 1>,
    .device_body = "evt::kernels::moe_combine_body", .device_header = kHeader, .relative_cost = 1});

}  // namespace evt::kernels
