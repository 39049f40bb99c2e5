#pragma once
// A graph instantiated for one binding: concrete tile grids and event shapes, every event
// element's wait count, and the tile-level edges the binding alone decides. Executors and the
// verifier's concrete checks both read this; nothing here is compiled per binding.
//
// Execution semantics (the spec every backend follows):
//  - A task first waits on the elements of its data-independent in-edges, then resolves its
//    data-dependent in-edges in order (their index buffers are ready by then) and waits on those.
//  - It runs its tile function, then notifies its out-edge elements: data-independent ones from
//    the tables here, data-dependent ones resolved from index buffers after the run.
//  - A task of a group with a range-trigger in-edge runs only if some element's range covers it;
//    otherwise it is inactive and is skipped without notifying.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "util/status.h"

namespace evt::ir {

// Initial counter value of an element whose wait count a producer task sets at run time.
constexpr int64_t kWaitCountUnset = int64_t{1} << 60;

struct GroupInstance {
  std::vector<int64_t> extents;
  int64_t first_task = 0;
  int64_t num_tasks = 0;
  std::vector<int> range_trigger_edges;  // indices into in_edges
  // Per in-edge, 1 when it keeps the layer (ir::layer_offset 0): a range trigger then releases
  // only tiles of its element's layer.
  std::vector<uint8_t> keeps_layer;
  std::vector<int> dd_in_edges;          // data-dependent kMap in-edges, resolved at run time
  std::vector<int> dd_out_edges;         // data-dependent out-edges, resolved after the run
};

struct EventInstance {
  std::vector<int64_t> shape;
  int64_t first_element = 0;
  int64_t num_elements = 0;
  bool runtime_count = false;
  bool has_dd_producer = false;  // some out-edge into it reads an index buffer
  int setter_group = -1;         // the group listing it in `sets`
};

// A group that must finish before another starts, because of a data-dependent edge between them:
// all of it, or, for two layered groups whose edges stay within a layer (ir::layer_offset 0), its
// tasks of each layer before the other's tasks of the same layer.
struct GroupPred {
  int group = -1;
  bool same_layer = false;
};

// Compressed rows: the values of row r are values[offsets[r] .. offsets[r+1]).
struct Csr {
  std::vector<int64_t> offsets{0};
  std::vector<int64_t> values;
  std::span<const int64_t> row(int64_t r) const {
    return {values.data() + offsets[r], values.data() + offsets[r + 1]};
  }
};

class TileGraph {
 public:
  const Graph& graph() const { return *graph_; }
  const Binding& binding() const { return binding_; }
  std::span<const GroupInstance> groups() const { return groups_; }
  std::span<const EventInstance> events() const { return events_; }
  // Buffer shapes for this binding, in the graph's buffer order.
  std::span<const std::vector<int64_t>> buffer_shapes() const { return buffer_shapes_; }
  int64_t num_tasks() const { return num_tasks_; }
  int64_t num_elements() const { return num_elements_; }

  // Task and element ids are global: group g's tile with linear index l is task first_task + l.
  int group_of_task(int64_t task) const;
  std::vector<int64_t> task_coords(int64_t task) const;
  void task_coords(int64_t task, std::vector<int64_t>& out) const;  // reuses `out`'s storage
  int event_of_element(int64_t element) const;
  std::vector<int64_t> element_coords(int64_t element) const;
  std::string task_name(int64_t task) const;        // "partial(3, 1)"
  std::string element_name(int64_t element) const;  // "E[3]"

  // Wait count per element (kWaitCountUnset for run-time counts).
  std::span<const int64_t> initial_counts() const { return initial_counts_; }
  // Notifications each element receives through data-independent out-edges.
  std::span<const int64_t> static_notifications() const { return static_notifications_; }

  const Csr& in_elements() const { return in_elements_; }    // task -> awaited elements
  const Csr& out_elements() const { return out_elements_; }  // task -> notified elements
  const Csr& consumers() const { return consumers_; }        // element -> waiting tasks
  // Number of releases a task needs before dynamic scheduling may run it: one per awaited
  // element of its data-independent in-edges, plus one per range-trigger in-edge.
  std::span<const int32_t> release_counts() const { return release_counts_; }

  // A global topological order. Data-dependent edges order whole groups (GroupPred): every task
  // of a producer group precedes every task of a consumer group of the same event, or of the
  // same layer of it. Ties go to the smaller task id, which runs groups in file order.
  std::span<const int64_t> topo_order() const { return topo_order_; }
  // Another topological order, with ties broken by `key` (smaller first): chaos schedules use it.
  Expected<std::vector<int64_t>> topological_order(const std::function<uint64_t(int64_t task)>& key) const;
  // Groups that must finish, entirely or layer by layer, before a given group starts (through
  // data-dependent edges).
  std::span<const GroupPred> group_predecessors(int group) const { return group_preds_[group]; }

  // Resolves an edge map of one task against index buffers. Calls `emit` with each element id;
  // negative values read from index buffers mean "no event" and are skipped.
  using LoadFn = std::function<Expected<int64_t>(const std::string& buffer, std::span<const int64_t> index)>;
  Status resolve(int64_t task, const Edge& edge, const LoadFn& load,
                 const std::function<void(int64_t element)>& emit) const;
  // For a range-trigger in-edge: the consumer tile range [begin, end) that `element` releases.
  Expected<std::pair<int64_t, int64_t>> trigger_range(const Edge& edge, int64_t element, const LoadFn& load) const;

  friend Expected<TileGraph> instantiate(const Graph& graph, const Binding& binding);

 private:
  const Graph* graph_ = nullptr;
  Binding binding_;
  std::vector<GroupInstance> groups_;
  std::vector<EventInstance> events_;
  std::vector<std::vector<int64_t>> buffer_shapes_;
  int64_t num_tasks_ = 0, num_elements_ = 0;
  std::vector<int64_t> initial_counts_, static_notifications_;
  Csr in_elements_, out_elements_, consumers_;
  std::vector<int32_t> release_counts_;
  std::vector<int64_t> topo_order_;
  std::vector<std::vector<GroupPred>> group_preds_, group_succs_;
  // The nodes of the order's graph past the tasks and elements: per group one "all of its tasks"
  // node, then one per layer of a layered group; group g's first is barrier_first_[g].
  std::vector<int64_t> barrier_first_;

  Status build_groups_and_events();
  Status build_edges();
  Status compute_counts();
  void compute_group_predecessors();
  Expected<int64_t> eval(const Expr& e, std::span<const std::string> vars, std::span<const int64_t> values,
                         const LoadFn* load) const;
  int64_t layer_of_task(int group, int64_t task) const;
  // Calls f(successor) for each successor of a node: a task's notified elements and barrier
  // nodes, an element's waiting tasks, a barrier node's tasks.
  // (Defined, and used, in tile_graph.cc only.)
  template <class F>
  void for_each_successor(int64_t node, F&& f) const;
  std::string node_name(int64_t node) const;
  std::string cycle_report(const std::vector<int32_t>& indegree) const;
};

// Instantiates `graph` for `binding`. The graph must outlive the result. Errors name the group,
// edge and tile when a map leaves its event's shape, and give a cycle when there is one.
Expected<TileGraph> instantiate(const Graph& graph, const Binding& binding);

}  // namespace evt::ir
