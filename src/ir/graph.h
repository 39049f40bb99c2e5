#pragma once
// The Event Tensor graph (seed 000, 001): symbolic dims, buffers, event tensors and task groups
// joined by edge maps. This is the one program representation every pass and backend reads.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/edge_map.h"
#include "ir/expr.h"

namespace evt::ir {

enum class DType { kF32, kBF16, kF16, kI32, kI64 };
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(const std::string& name);
int dtype_bytes(DType t);

struct Buffer {
  std::string name;
  std::vector<Expr> shape;
  DType dtype = DType::kF32;
  friend bool operator==(const Buffer&, const Buffer&) = default;
};

struct WaitCount {
  enum class Kind {
    kInferred,  // from the out-edges, by the infer_wait_counts pass
    kExplicit,  // written in the graph; the verifier checks it
    kRuntime,   // set at run time by the task group that lists the event in `sets`
  };
  Kind kind = Kind::kInferred;
  Expr count;  // kExplicit; kInferred once inference found a closed form
  friend bool operator==(const WaitCount&, const WaitCount&) = default;
};

struct Event {
  std::string name;
  std::vector<Expr> shape;
  WaitCount wait;
  friend bool operator==(const Event&, const Event&) = default;
};

struct Edge {
  std::string event;
  EdgeMap map;
  // `{E: "ij->i"}`, as written in graph files: how messages name an edge.
  std::string str() const;
  friend bool operator==(const Edge&, const Edge&) = default;
};

// A call_device: one tile function over a symbolic tile grid. Each grid point is a task.
// Where a group's tasks run when a megakernel schedules per group: in the static per-SM order
// (dense, predictable work) or from the dynamic ready queue (irregular work). Inline: a small
// group that awaits one event runs, under the static and per-group schedules, on the worker whose
// notification completes that event's element, right after the notifying task, rather than in a
// queue of its own: no hop to another SM and no slot in the static order (kernels mode launches
// it as usual; the dynamic schedule queues it).
enum class GroupSchedule { kStatic, kDynamic, kInline };

struct TaskGroup {
  std::string name;
  std::string function;
  std::vector<Expr> tiles;
  std::vector<std::string> reads, writes;
  std::vector<Edge> in_edges;   // waited on in this order before the task runs
  std::vector<Edge> out_edges;  // notified after the task ran
  std::vector<std::string> sets;  // events whose run-time wait counts this group sets
  GroupSchedule schedule = GroupSchedule::kStatic;
  // Tile dim 0 is a layer index, as in a model's decode step: the static megakernel order runs
  // the layered groups layer by layer, so they may feed one another across layers.
  bool layered = false;
  friend bool operator==(const TaskGroup&, const TaskGroup&) = default;
};

struct Graph {
  std::string name;
  std::vector<std::string> dims;  // symbolic dimensions bound at run time (B, T, ...)
  std::vector<Buffer> buffers;
  std::vector<Event> events;
  std::vector<TaskGroup> groups;

  const Buffer* find_buffer(const std::string& n) const;
  const Event* find_event(const std::string& n) const;
  const TaskGroup* find_group(const std::string& n) const;
  int event_index(const std::string& n) const;   // -1 if absent
  int buffer_index(const std::string& n) const;  // -1 if absent
  bool has_dim(const std::string& n) const;

  friend bool operator==(const Graph&, const Graph&) = default;
};

// For an edge of a layered group: the constant c such that the edge's event element has the task's
// layer + c as its dim 0, or nothing when it has not. A range trigger counts as c = 0 when its
// event's dim 0 has the layer count as extent: element (l, ...) releases tiles of layer l only,
// which the run time checks. Edges with c = 0 order two layered groups within each layer, also
// when they are data-dependent (TileGraph, the static megakernel order).
std::optional<int64_t> layer_offset(const Graph& graph, const TaskGroup& group, const Edge& edge);

// Whether a range-trigger in-edge has one element that can release any given task: its event's
// only element, or the task's layer's only one when the trigger keeps the layer. The static
// schedule waits for that element before it reads the range, so the element's producers order the
// index buffers' writes before the read (the generated code and the verifier both rely on it).
bool single_element_trigger(const Graph& graph, const TaskGroup& group, const Edge& edge);

// Whether a task can wait for in-edge `edge` knowing only its tile: a data-independent map, or a
// single-element trigger. What those edges guard is readable before the rest of the task's wait
// (the loader reads a StreamAfter::kGuards stream's tables then; the verifier checks it can).
bool waited_by_tile(const Graph& graph, const TaskGroup& group, const Edge& edge);

// Values for a graph's symbolic dims, e.g. {B: 37}.
using Binding = std::map<std::string, int64_t>;
std::string binding_str(const Binding& b);  // "B=37, T=4"

// "(3, 1)", for messages naming a tile or an event element.
std::string coords_str(const std::vector<int64_t>& c);

}  // namespace evt::ir
