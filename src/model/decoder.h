#pragma once
// A backend that runs steps of the dense decode graph for one loaded model: the CPU backend
// (cpu_decoder.h) and the CUDA backend (cuda_decoder.h). It owns the KV cache; the caller owns
// the page pool and says in each StepBatch which pages a sequence holds.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/decode_plan.h"
#include "model/tuning_table.h"
#include "util/status.h"

namespace evt::model {

// How a step runs. The megakernel modes, kernels and graphs run the same generated code
// (seed 001's comparison); reference runs the graph on the CPU executor with the registry's
// naive CPU references, the spec the others are checked against.
enum class Exec {
  kReference,          // CPU executor + CPU references (CPU only)
  kMegakernel,         // one persistent kernel per step, static per-SM queues
  kMegakernelDynamic,  // one persistent kernel per step, on-device ready queue
  kMegakernelMixed,    // one persistent kernel per step, each group as the graph says (MoE experts dynamic)
  kKernels,            // one launch per task group per layer
  kGraphs,             // the kernels mode captured as CUDA graphs per token-count bucket (CUDA only)
};
// One persistent kernel per step: the modes a trace covers.
constexpr bool is_megakernel(Exec e) {
  return e == Exec::kMegakernel || e == Exec::kMegakernelDynamic || e == Exec::kMegakernelMixed;
}
std::string_view exec_name(Exec e);
std::optional<Exec> parse_exec(std::string_view name);
// Every name parse_exec takes, for --help and error messages.
std::string exec_names();

// One task group's tasks in one layer of a traced step (layer -1: a group that is not layered):
// when the first began and the last ended, microseconds after the step's first task began, and
// how many ran (tiles a range trigger did not release do not run).
struct StageTime {
  std::string group;
  int64_t layer = -1;
  double start_us = 0, end_us = 0;
  int64_t tasks = 0;
};

struct StepOutput {
  std::vector<int32_t> next;  // greedy token per sequence
  std::vector<float> logits;  // S x V, when the step asked for them
  double device_ms = 0;       // CUDA: the step's kernels by device events (inputs uploaded); CPU: 0
  std::vector<StageTime> stages;  // a traced step's (trace_next_step), by group and layer
};

// What a backend did besides running steps: the baselines' start-up costs.
struct DecoderStats {
  int64_t graphs_captured = 0;  // CUDA graphs (graphs mode)
  double capture_ms = 0;        // their capture and instantiation, summed
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual const ModelConfig& config() const = 0;
  virtual KvGeometry kv() const = 0;
  // "cpu megakernel, 4 workers" and the like, for logs.
  virtual std::string describe() const = 0;
  virtual Expected<StepOutput> step(const StepBatch& batch, bool want_logits) = 0;
  virtual DecoderStats stats() const { return {}; }
  // Records every task of the next step: its StepOutput::stages and, unless `path` is empty, a
  // Chrome trace (Perfetto) written to `path`, one track per SM or worker, a slice per task with
  // its wait inside. The megakernel modes and the kernels mode (its launches are not replays).
  virtual Status trace_next_step(const std::string& path) {
    (void)path;
    return error("{}: no per-task trace for this backend", describe());
  }

  // Steps take their splits from `table` (eventide tune) where it has an entry, instead of
  // default_tiling()'s rules; null goes back to the rules. Fails, naming both, when the table was
  // measured for other model shapes.
  Status set_tuning(std::shared_ptr<const TuningTable> table);
  // The tiling of a step of `tokens` tokens whose longest context is `longest_context`:
  // default_tiling()'s for this backend's workers, with the tuning table's splits.
  Tiling step_tiling(int64_t tokens, int64_t longest_context) const;

 protected:
  // The SMs or threads default_tiling() fills.
  virtual int tiling_workers() const { return 1; }

 private:
  std::shared_ptr<const TuningTable> tuning_;
};

}  // namespace evt::model
