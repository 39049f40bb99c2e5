// Registry row of the random-graph tests' tile; the body is in mix_hash.h. A built-in row, like
// staged_add, because evt_codegen lowers graphs against the built-in registry and the generated
// header includes the body from src/.
#include "kernels/examples/mix_hash.h"

#include "kernels/registry.h"

namespace evt::kernels {

EVT_REGISTER_TILE_FUNCTION(mix, TileFunction{
    .name = "mix", .summary = "hash of the task id and the values of the tasks it depends on (random-graph tests)",
    .num_reads = 1, .num_writes = 1, .cpu = run_body_on_cpu<mix_body<SerialBlock>, 1, 1>,
    .device_body = "evt::kernels::mix_body", .device_header = "kernels/examples/mix_hash.h", .relative_cost = 0.1});

}  // namespace evt::kernels
