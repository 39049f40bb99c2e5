#pragma once
// The tile-function registry: one row per tile function, holding everything a backend needs to
// call it. Adding a kernel means adding one row beside its code (EVT_REGISTER_TILE_FUNCTION) and
// its test; nothing else changes.

#include <map>
#include <string>

#include "kernels/tile_args.h"

namespace evt::kernels {

using CpuTileFn = void (*)(const TileArgs& args);

// A task form that several tile functions share: the task as plain data of type `type`, run by
// `run` (void f(const Block&, const type&)) with the weight stream `stream` (WeightStream
// f(const Block&, const type&)). Names of device functions, as device_body is.
struct SharedTask {
  std::string type, run, stream;
};

// When the loader may compute a task's weight stream, by what the stream reads.
enum class StreamAfter {
  // Only what no awaited event guards: before the task's waits, so the ring fills across them.
  kNothing,
  // Buffers an awaited event guards: the loader learns each task from the block's leader after
  // its whole wait, as it does a range-triggered task's, so none of its weights are fetched across
  // the wait.
  kWait,
  // Only buffers that the group's data-independent in-edges and a single-element range trigger
  // guard, never what a searched trigger's element guards; and nothing for a task that a trigger
  // skips. Under the static schedule the loader waits for those edges itself and fills the ring
  // across the rest of the leader's wait. A routed expert's tile: the plan's tables say which
  // expert's weights it streams; its expert's activations, which the searched ACTX element
  // guards, are the body's alone (docs/moe_decode.md).
  kGuards,
};

struct TileFunction {
  std::string name;
  std::string summary;       // one line, for --help and error messages
  int num_reads = 0;         // the buffers a call_device must pass, in order
  int num_writes = 0;
  CpuTileFn cpu = nullptr;   // the CPU reference: the spec for every other backend
  // The tile body the generated megakernel calls (tile_body.h), and the header declaring it;
  // empty when the function has no device version yet.
  std::string device_body;
  std::string device_header;
  // Optional: run by every thread of the block before the task's waits, on data that no awaited
  // event guards (weights): the prefetch prologue (seed 001, mechanism 3). Same signature as a body.
  std::string device_prologue;
  // Optional: the task's weight stream (kernels/weight_stream.h), which the GPU's loader warp
  // copies into shared memory ahead of the body, across its wait; the body reads it through
  // b.weights(stream). Signature: WeightStream f(const Block&, tile, reads, writes); it may read
  // only what no awaited event guards (cfg, weights, buffer shapes), unless stream_after says
  // otherwise.
  std::string device_stream;
  StreamAfter stream_after = StreamAfter::kNothing;
  // Optional: the tile function is one case of a shared task (kernels/llm/gemv.h's GemvTask for
  // the projections). device_task builds it (Task f(tile, reads, writes), reading what
  // device_stream may read) and `shared` runs it. The megakernel then builds the task in the
  // class's case of its dispatch and runs every class that shares `shared` through one call
  // after it, so that the runner's code is in the kernel once: an SM that ran one projection finds
  // the next one's code in its instruction cache rather than fetching it from the L2 again
  // (bench/README.md). device_body and device_stream stay the function's own (the tile tests
  // call them) and must do the same as the shared pair.
  std::string device_task;
  SharedTask shared;
  double relative_cost = 1;  // cost estimate used by the static list scheduler
};

class Registry {
 public:
  // Adds a row; a second row with the same name replaces the first (tests override built-ins).
  void add(TileFunction fn);
  const TileFunction* find(const std::string& name) const;

  // The built-in tile functions registered by EVT_REGISTER_TILE_FUNCTION.
  static const Registry& builtins();
  // Aborts, naming it, when a built-in of the same name exists.
  static bool register_builtin(TileFunction fn);

 private:
  std::map<std::string, TileFunction> rows_;
};

}  // namespace evt::kernels

// Registers a built-in row at static-initialization time. The kernels library is an OBJECT
// library so that the linker keeps every registering translation unit.
#define EVT_REGISTER_TILE_FUNCTION(tag, ...) \
  [[maybe_unused]] static const bool evt_registered_##tag = ::evt::kernels::Registry::register_builtin(__VA_ARGS__)
