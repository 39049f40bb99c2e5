#include "compiler/codegen/megakernel_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "compiler/infer_wait_counts.h"
#include "ir/text_form.h"
#include "ir/tile_graph.h"
#include "kernels/tile_body.h"

namespace evt::compiler {

namespace {

using ir::Expr;
using ir::Op;

// C++ spellings of the IR's names in one scope of generated code.
struct Scope {
  std::map<std::string, std::string> vars;  // IR variable -> C++ expression
};

class Emitter {
 public:
  Emitter(const ir::Graph& g, const kernels::Registry& registry, std::string ns)
      : g_(g), registry_(registry), ns_(std::move(ns)) {}

  Expected<std::string> run();

 private:
  // --- expressions
  std::string expr(const Expr& e, const Scope& s) const;
  Scope dims_scope() const;
  std::string extent(const std::vector<Expr>& shape, size_t k) const { return expr(shape[k], dims_scope()); }
  std::string ravel(const std::vector<Expr>& shape, const std::vector<std::string>& coords) const;
  // The product of a shape's extents (elements of an event, tiles of a group).
  std::string product_expr(const std::vector<Expr>& shape) const;
  // The number of tiles of group g, and of all groups before it (its first task id).
  std::string tiles_expr(size_t g) const { return product_expr(g_.groups[g].tiles); }
  std::string first_task_expr(size_t g) const;
  // Straight-line code mapping `index` to (group, linear): over the groups in `before`, then
  // layer after layer over the tiles of that layer of the `layered` groups, then over `after`.
  void emit_decode(const std::vector<int>& before, const std::vector<int>& layered, const std::vector<int>& after,
                   const std::string& index);
  // Tiles of a group in one layer (all its tiles if it is not layered).
  std::string layer_tiles_expr(size_t g) const;
  // `EVT_HD inline RET NAME(PARAMS) { switch (KEY) { case i: return value(i); ... } }`.
  template <typename Value>
  void emit_switch(const std::string& signature, const std::string& key, size_t cases, Value&& value,
                   const std::string& fallback);

  // --- sections
  Status check_supported();
  Status static_order();
  void emit_prelude();
  void emit_shapes();
  void emit_views();
  void emit_group_geometry();
  void emit_events();
  void emit_releases();
  Status emit_fires();
  void emit_groups();
  void emit_dispatch_and_loops();
  // Kernels mode: the launches in the static order, one per group or, for layered groups, one
  // per group and layer.
  void emit_launches();

  // --- edges
  // Emits loops binding the event element `x` of `edge` for the task whose tile coordinates are
  // in scope, then `action` (using `x`), then closes the loops.
  void emit_edge_elements(const ir::Edge& edge, int group, const std::string& action, const std::string& abort_value);
  // Whether `edge` releases, for element x, the consumer's tile x (see the definition).
  bool is_identity(const ir::TaskGroup& group, const ir::Edge& edge) const;
  // The inline group that element x of event e releases as its tile x, and nothing else: its one
  // in-edge is the identity and no other inline group awaits e. -1 when there is none.
  int inline_by_index(size_t e) const;
  // Where the released tasks that need no other release go: the ready queue (mk::push_tasks, as
  // task indices) or the notifying worker's inline queue (mk::queue_inline, as mk::task_id).
  enum class Sink { kReadyQueue, kInline };
  Status emit_inverse(int consumer, const ir::Edge& edge, const std::string& event_var, Sink sink = Sink::kReadyQueue);
  static const char* sink_name(Sink sink) { return sink == Sink::kInline ? "mk::queue_inline" : "mk::push_tasks"; }
  // The task `sink` takes for tile `linear` of group `consumer`.
  std::string sink_task(Sink sink, int consumer, const std::string& linear) const;

  // Emits `const int64_t e0 = ...;` for each coordinate of element `x` of `ev`; returns the names
  // (maybe unused: a consumer whose in-edge ignores a coordinate never reads it).
  std::vector<std::string> emit_element_coords(const ir::Event& ev, const std::string& x);
  // Releases a task of group g needs before dynamic scheduling may push it.
  std::string needed_expr(size_t g) const;
  bool dynamic_ok() const { return dynamic_error_.empty(); }
  // "true" when the graph asks for group g to run from the ready queue under per-group scheduling.
  std::string dynamic_flag(size_t g) const {
    return g_.groups[g].schedule == ir::GroupSchedule::kDynamic ? "true" : "false";
  }
  bool is_inline(size_t g) const { return g_.groups[g].schedule == ir::GroupSchedule::kInline; }
  // The group order without the inline groups, which have no place in the static order.
  std::vector<int> without_inline(std::vector<int>::const_iterator from, std::vector<int>::const_iterator to) const {
    std::vector<int> kept;
    std::copy_if(from, to, std::back_inserter(kept), [&](int g) { return !is_inline(static_cast<size_t>(g)); });
    return kept;
  }

  // --- references from group code
  // A group's code names its events, buffers and group id through these. While one group is
  // emitted they spell run-time references into its GroupRef (r.event[k], ...), so groups that
  // differ only in which events and buffers they use emit the same text and share one function:
  // a class. Code shared by every group means fewer instruction-cache misses per task.
  struct Refs {
    std::vector<int> events, buffers;
  };
  std::string event_ref(int e) const;
  std::string buffer_ref(int b) const;
  std::string group_ref(int g) const { return refs_ ? "r.group" : std::to_string(g); }
  // Params::views holds each group's reads then writes, group after group.
  int64_t view_offset(size_t gi) const {
    int64_t at = 0;
    for (size_t k = 0; k < gi; ++k) at += static_cast<int64_t>(g_.groups[k].reads.size() + g_.groups[k].writes.size());
    return at;
  }
  int64_t total_views() const { return view_offset(g_.groups.size()); }
  // One group's wait, body, prologue and notify, with "@K@" where its class id goes.
  void emit_group_code(size_t gi);
  // The members every Block type has: the worker's threads, its scratch and its weight stream.
  void emit_block_members();
  // The dispatch `name` of `what` (body or stream) over the classes `keep` selects: a class with a
  // shared task builds it in its case, and one call of the shared runner (or stream) runs every
  // such class (TileFunction::device_task).
  void emit_shared_dispatch(const std::string& ret, const std::string& what, const std::string& name,
                            const std::string& fallback, const std::vector<bool>& keep);

  void line(const std::string& text) { out_ += std::string(indent_ * 2, ' ') + text + "\n"; }
  void open(const std::string& text) {
    line(text);
    ++indent_;
  }
  void close(const std::string& text = "}") {
    --indent_;
    line(text);
  }

  const ir::Graph& g_;
  const kernels::Registry& registry_;
  std::string ns_;
  std::string out_;
  int indent_ = 0;
  // The static order (static_order()): the groups before the layers then those after them in
  // group_order_, split at groups_before_layers_; the layered groups of one layer in layer_order_.
  std::vector<int> group_order_, layer_order_;
  int groups_before_layers_ = 0;
  Expr layers_;                      // the layer count of the layered groups' tile dim 0
  std::vector<int> source_groups_;   // groups that await nothing
  std::string dynamic_error_;        // why dynamic scheduling cannot be generated, if it cannot
  int loop_ = 0;                     // fresh loop-variable names
  Refs* refs_ = nullptr;             // set while one group's code is emitted
  std::vector<Refs> group_refs_;     // per group: what r.event[k] and r.buffer[k] stand for
  std::vector<int> class_of_;        // per group
  size_t classes_ = 0;
  std::vector<const kernels::TileFunction*> class_fn_;  // per class: its groups' tile function
  Refs max_refs_;                    // the longest lists, padded with -1 (at least one entry)
};

// --- expressions ----------------------------------------------------------------------------

std::string Emitter::expr(const Expr& e, const Scope& s) const {
  switch (e.op()) {
    case Op::kConst: return fmt::format("int64_t{{{}}}", e.value());
    case Op::kVar: {
      auto it = s.vars.find(e.name());
      return it == s.vars.end() ? "/*unbound " + e.name() + "*/0" : it->second;
    }
    case Op::kAdd: return fmt::format("({} + {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kSub: return fmt::format("({} - {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kMul: return fmt::format("({} * {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kFloorDiv: return fmt::format("mk::floor_div({}, {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kMod: return fmt::format("mk::floor_mod({}, {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kMin: return fmt::format("mk::min_i({}, {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kMax: return fmt::format("mk::max_i({}, {})", expr(e.args()[0], s), expr(e.args()[1], s));
    case Op::kLoad: {
      const int b = g_.buffer_index(e.name());
      std::string args;
      for (const Expr& i : e.args()) args += ", " + expr(i, s);
      return fmt::format("mk::load_at(p.buffers[{}], {}{})", buffer_ref(b), g_.buffers[b].dtype == ir::DType::kI64, args);
    }
  }
  return "0";
}

Scope Emitter::dims_scope() const {
  Scope s;
  for (size_t d = 0; d < g_.dims.size(); ++d) s.vars[g_.dims[d]] = fmt::format("p.dims[{}]", d);
  return s;
}

std::string Emitter::event_ref(int e) const {
  if (!refs_) return std::to_string(e);
  auto& v = refs_->events;
  auto it = std::find(v.begin(), v.end(), e);
  if (it == v.end()) it = v.insert(v.end(), e);
  return fmt::format("r.event[{}]", it - v.begin());
}

std::string Emitter::buffer_ref(int b) const {
  if (!refs_) return std::to_string(b);
  auto& v = refs_->buffers;
  auto it = std::find(v.begin(), v.end(), b);
  if (it == v.end()) it = v.insert(v.end(), b);
  return fmt::format("r.buffer[{}]", it - v.begin());
}

std::string Emitter::ravel(const std::vector<Expr>& shape, const std::vector<std::string>& coords) const {
  std::string r = coords.empty() ? "int64_t{0}" : coords[0];
  for (size_t k = 1; k < coords.size(); ++k) r = fmt::format("({} * {} + {})", r, extent(shape, k), coords[k]);
  return r;
}

std::string Emitter::product_expr(const std::vector<Expr>& shape) const {
  std::string n = "int64_t{1}";
  for (size_t k = 0; k < shape.size(); ++k) n += " * " + extent(shape, k);
  return n;
}

template <typename Value>
void Emitter::emit_switch(const std::string& signature, const std::string& key, size_t cases, Value&& value,
                          const std::string& fallback) {
  open(fmt::format("EVT_HD inline {} {{", signature));
  open(fmt::format("switch ({}) {{", key));
  for (size_t i = 0; i < cases; ++i) line(fmt::format("case {}: return {};", i, value(i)));
  line(fmt::format("default: return {};", fallback));
  close();
  close();
}

std::string Emitter::first_task_expr(size_t g) const {
  std::string s = "int64_t{0}";
  for (size_t h = 0; h < g; ++h) s += " + " + tiles_expr(h);
  return s;
}

std::string Emitter::layer_tiles_expr(size_t g) const {
  const auto& tiles = g_.groups[g].tiles;
  if (!g_.groups[g].layered) return tiles_expr(g);
  return product_expr(std::vector<Expr>(tiles.begin() + 1, tiles.end()));
}

void Emitter::emit_decode(const std::vector<int>& before, const std::vector<int>& layered,
                          const std::vector<int>& after, const std::string& index) {
  auto run_of = [&](const std::vector<int>& groups) {
    for (int g : groups) {
      line(fmt::format("n = {};", tiles_expr(g)));
      line(fmt::format("if ({0} < first + n) {{ group = {1}; linear = {0} - first; return; }}", index, g));
      line("first += n;");
    }
  };
  line("int64_t first = 0, n = 0;");
  line("(void)n;");
  run_of(before);
  if (!layered.empty()) {
    open("{  // the layers: one round of the layered groups' tiles per layer");
    std::string round = "int64_t{0}";
    for (int g : layered) round += " + " + layer_tiles_expr(g);
    line(fmt::format("const int64_t layers = {}, round = {};", expr(layers_, dims_scope()), round));
    open(fmt::format("if ({} < first + layers * round) {{", index));
    // mk::floor_div: a 32-bit division where the values fit, as they do; a 64-bit one is a
    // subroutine call, and this runs between every two tasks on the leader's path.
    line(fmt::format("const int64_t layer = mk::floor_div({} - first, round);", index));
    line(fmt::format("int64_t r = ({} - first) - layer * round;", index));
    for (int g : layered) {
      line(fmt::format("n = {};", layer_tiles_expr(g)));
      line(fmt::format("if (r < n) {{ group = {}; linear = layer * n + r; return; }}", g));
      line("r -= n;");
    }
    close();
    line("first += layers * round;");
    close();
  }
  run_of(after);
  line("group = -1;");
  line("linear = -1;");
}

std::string Emitter::needed_expr(size_t g) const {
  std::string needed = "int64_t{0}";
  for (const auto& in : g_.groups[g].in_edges) {
    if (in.map.kind == ir::EdgeMap::Kind::kRangeTrigger) {
      needed += " + 1";
      continue;
    }
    const ir::Event& ev = *g_.find_event(in.event);
    std::string per = "int64_t{1}";
    for (size_t k = 0; k < in.map.coords.size(); ++k) {
      if (in.map.coords[k].kind == ir::Coord::Kind::kSlice) per += " * " + extent(ev.shape, k);
    }
    needed += " + " + per;
  }
  return needed;
}

std::vector<std::string> Emitter::emit_element_coords(const ir::Event& ev, const std::string& x) {
  std::vector<std::string> names(ev.shape.size());
  std::string rest = x;
  for (size_t k = ev.shape.size(); k-- > 0;) {
    names[k] = fmt::format("e{}", k);
    line(fmt::format("[[maybe_unused]] const int64_t {} = {};", names[k],
                     k == 0 ? rest : fmt::format("mk::floor_mod({}, {})", rest, extent(ev.shape, k))));
    if (k > 0) rest = fmt::format("mk::floor_div({}, {})", rest, extent(ev.shape, k));
  }
  return names;
}

// --- checks ---------------------------------------------------------------------------------

Status Emitter::check_supported() {
  for (size_t ei = 0; ei < g_.events.size(); ++ei) {
    const ir::Event& ev = g_.events[ei];
    if (ev.wait.kind != ir::WaitCount::Kind::kRuntime && !ev.wait.count.defined()) {
      return error("event {}: the megakernel needs a closed-form wait count; this one is counted per element, so "
                   "declare wait_count=EXPR",
                   ev.name);
    }
  }
  for (const ir::TaskGroup& group : g_.groups) {
    const kernels::TileFunction* fn = registry_.find(group.function);
    if (!fn) return error("task group {}: unknown tile function '{}'", group.name, group.function);
    if (fn->device_body.empty()) {
      return error("task group {}: tile function {} has no device body yet", group.name, group.function);
    }
    if (!fn->device_task.empty() && (fn->shared.type.empty() || fn->shared.run.empty() || fn->shared.stream.empty())) {
      return error("task group {}: tile function {} builds a shared task but names no type, runner or stream for it",
                   group.name, group.function);
    }
    if (group.tiles.size() > 4) return error("task group {}: tile grids of rank above 4 are not supported", group.name);
  }
  for (const ir::Buffer& b : g_.buffers) {
    if (b.shape.size() > kernels::DevBuffer::kMaxRank) {
      return error("buffer {}: rank above {} is not supported on the device", b.name, kernels::DevBuffer::kMaxRank);
    }
  }
  return static_order();
}

// How far a layered group's edge shifts the layer: the event's coordinate 0 minus tile dim 0,
// which must be a constant (`"ln->(l, n)"` is 0, `"ln->(l+1)"` is 1).
Expected<int64_t> checked_layer_offset(const ir::Graph& g, const ir::TaskGroup& group, const ir::Edge& edge) {
  if (auto d = ir::layer_offset(g, group, edge)) return *d;
  return error("task group {} is layered, so edge {} must index its event's dim 0 by the layer plus a constant",
               group.name, edge.str());
}

// The static order: groups in a topological order, tiles in order within each. Layered groups
// (tile dim 0 is the layer) run layer by layer, between the groups before all layers and those
// after: within a layer in the order of their same-layer dependencies, while a dependency on
// an earlier layer is met by the layer order itself.
Status Emitter::static_order() {
  const size_t n = g_.groups.size();
  // preds[c]: the groups c waits for within its region (same layer, for layered groups).
  std::vector<std::set<int>> preds(n);
  std::vector<bool> after_layers(n, false);  // non-layered groups that some layered group feeds
  for (size_t c = 0; c < n; ++c) {
    const ir::TaskGroup& consumer = g_.groups[c];
    if (consumer.in_edges.empty()) source_groups_.push_back(static_cast<int>(c));
    for (const auto& in : consumer.in_edges) {
      // A chain within a group must run forward in tile order, which the static order respects.
      for (size_t p = 0; p < n; ++p) {
        if (p == c) continue;
        const ir::TaskGroup& producer = g_.groups[p];
        for (const auto& out : producer.out_edges) {
          if (out.event != in.event) continue;
          if (!producer.layered || !consumer.layered) {
            preds[c].insert(static_cast<int>(p));
            continue;
          }
          EVT_ASSIGN_OR_RETURN(const int64_t produced, checked_layer_offset(g_, producer, out));
          EVT_ASSIGN_OR_RETURN(const int64_t awaited, checked_layer_offset(g_, consumer, in));
          if (awaited > produced) {
            return error("task group {} awaits {} from a later layer of task group {}; layers run in order",
                         consumer.name, in.event, producer.name);
          }
          if (awaited == produced) preds[c].insert(static_cast<int>(p));
        }
      }
    }
  }
  // Regions: groups before the layers, the layered groups, groups after them.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t c = 0; c < n; ++c) {
      if (g_.groups[c].layered || after_layers[c]) continue;
      for (int p : preds[c]) {
        if (g_.groups[p].layered || after_layers[p]) after_layers[c] = changed = true;
      }
    }
  }
  auto region = [&](size_t g) { return g_.groups[g].layered ? 1 : after_layers[g] ? 2 : 0; };
  for (size_t c = 0; c < n; ++c) {
    for (int p : preds[c]) {
      if (region(p) > region(c)) {
        return error("task group {} runs before the layers but awaits task group {}, which runs in or after them",
                     g_.groups[c].name, g_.groups[p].name);
      }
    }
  }
  int first_layered = -1;
  for (size_t g = 0; g < n; ++g) {
    if (!g_.groups[g].layered) continue;
    if (first_layered < 0) {
      first_layered = static_cast<int>(g);
      layers_ = g_.groups[g].tiles[0];
    } else if (!provably_equal(g_.groups[g].tiles[0], layers_)) {
      return error("layered task groups {} and {} have different layer counts ({} and {})",
                   g_.groups[first_layered].name, g_.groups[g].name, layers_.str(), g_.groups[g].tiles[0].str());
    }
  }
  for (int r = 0; r < 3; ++r) {
    std::vector<bool> placed(n, false);
    size_t in_region = 0;
    for (size_t g = 0; g < n; ++g) in_region += region(g) == r;
    for (size_t done = 0; done < in_region;) {
      bool progress = false;
      for (size_t c = 0; c < n; ++c) {
        if (placed[c] || region(c) != r) continue;
        if (std::all_of(preds[c].begin(), preds[c].end(), [&](int p) { return region(p) < r || placed[p]; })) {
          placed[c] = true;
          (r == 1 ? layer_order_ : group_order_).push_back(static_cast<int>(c));
          ++done;
          progress = true;
        }
      }
      if (!progress) {
        return error("the task groups form a cycle through their events{}; the static megakernel order needs "
                     "a DAG of groups",
                     r == 1 ? " within one layer" : "");
      }
    }
    if (r == 0) groups_before_layers_ = static_cast<int>(group_order_.size());
  }
  return Status();
}

// --- prelude and geometry ---------------------------------------------------------------------

void Emitter::emit_prelude() {
  line("// Generated by eventide's megakernel codegen. Do not edit: change the graph or the generator.");
  line("#pragma once");
  line("");
  line("#include <string>");
  line("");
  line("#include \"runtime/megakernel/support.h\"");
  std::set<std::string> headers;
  for (const auto& group : g_.groups) headers.insert(registry_.find(group.function)->device_header);
  for (const auto& h : headers) line(fmt::format("#include \"{}\"", h));
  line("");
  open(fmt::format("namespace evt::generated::{} {{", ns_));
  line("");
  line("using kernels::DevBuffer;");
  line(fmt::format("inline constexpr int kNumDims = {};", g_.dims.size()));
  line(fmt::format("inline constexpr int kNumBuffers = {};", g_.buffers.size()));
  line(fmt::format("inline constexpr int kNumEvents = {};", g_.events.size()));
  line(fmt::format("inline constexpr int kNumGroups = {};", g_.groups.size()));
  line(fmt::format("inline constexpr bool kDynamicSupported = {};", dynamic_ok() ? "true" : "false"));
  const bool streams = std::any_of(g_.groups.begin(), g_.groups.end(), [&](const ir::TaskGroup& group) {
    return !registry_.find(group.function)->device_stream.empty();
  });
  line("// Whether some group reads a weight stream: then a CUDA block has a loader warp (weight_ring.cuh).");
  line(fmt::format("inline constexpr bool kHasStreams = {};", streams ? "true" : "false"));
  auto names = [&](const char* what, auto&& list) {
    std::string s;
    for (const auto& x : list) s += fmt::format("\"{}\", ", x);
    line(fmt::format("inline constexpr const char* {}[] = {{{}}};", what, s.empty() ? "\"\"" : s));
  };
  names("kDimNames", g_.dims);
  std::vector<std::string> buffers, events, groups;
  for (const auto& b : g_.buffers) buffers.push_back(b.name);
  for (const auto& e : g_.events) events.push_back(e.name);
  for (const auto& t : g_.groups) groups.push_back(t.name);
  names("kBufferNames", buffers);
  names("kEventNames", events);
  names("kGroupNames", groups);
  std::string layered;
  for (const auto& t : g_.groups) layered += t.layered ? "true, " : "false, ";
  line(fmt::format("inline constexpr bool kGroupLayered[] = {{{}}};", layered.empty() ? "false" : layered));
  // The graph itself, so the CPU executor can run exactly what was compiled (the spec it is
  // checked against).
  line(fmt::format("inline constexpr const char* kGraphText = R\"evt({})evt\";", ir::print_graph(g_)));
  std::string element_bytes;
  for (const auto& b : g_.buffers) element_bytes += fmt::format("{}, ", ir::dtype_bytes(b.dtype));
  line(fmt::format("inline constexpr int kBufferElementBytes[] = {{{}}};", element_bytes.empty() ? "0" : element_bytes));
  std::string runtime;
  for (const auto& e : g_.events) runtime += e.wait.kind == ir::WaitCount::Kind::kRuntime ? "true, " : "false, ";
  line(fmt::format("inline constexpr bool kRuntimeCount[] = {{{}}};", runtime.empty() ? "false" : runtime));
  // Without any, the waits and notifies carry no code for run-time counts.
  line(fmt::format("inline constexpr bool kAnyRuntimeCount = {};", runtime.find("true") != std::string::npos));
  // Whether every event an inline group awaits releases it by index (inline_by_index), so that
  // the static schedule's notify needs no fire().
  bool all_by_index = true;
  for (size_t g = 0; g < g_.groups.size(); ++g) {
    if (is_inline(g) && inline_by_index(g_.event_index(g_.groups[g].in_edges[0].event)) < 0) all_by_index = false;
  }
  line(fmt::format("inline constexpr bool kAllInlineByIndex = {};", all_by_index));
  // Early push needs a count known before the producers run: no run-time count, and no producer
  // whose notified element is read from an index buffer.
  std::string early;
  for (const auto& e : g_.events) {
    // Nor an inline group among the consumers: it runs when the element completes, not before.
    bool ok = e.wait.kind != ir::WaitCount::Kind::kRuntime;
    for (const auto& group : g_.groups) {
      for (const auto& out : group.out_edges) ok = ok && (out.event != e.name || out.map.is_data_independent());
      ok = ok && !(group.schedule == ir::GroupSchedule::kInline && group.in_edges[0].event == e.name);
    }
    early += ok ? "true, " : "false, ";
  }
  line(fmt::format("inline constexpr bool kEarlyPushable[] = {{{}}};", early.empty() ? "false" : early));
  std::string triggered;
  for (const auto& group : g_.groups) {
    const bool any = std::any_of(group.in_edges.begin(), group.in_edges.end(), [](const ir::Edge& e) {
      return e.map.kind == ir::EdgeMap::Kind::kRangeTrigger;
    });
    triggered += any ? "true, " : "false, ";
  }
  line(fmt::format("inline constexpr bool kRangeTriggered[] = {{{}}};", triggered.empty() ? "false" : triggered));
  line("");
  line("// The kernel's argument: symbolic dims, buffers (index tensors included) and event counters.");
  open("struct Params {");
  line(fmt::format("int64_t dims[{}];", std::max<size_t>(1, g_.dims.size())));
  line(fmt::format("DevBuffer buffers[{}];", std::max<size_t>(1, g_.buffers.size())));
  line(fmt::format("uint64_t* counters[{}];  // per event: arrivals per element, this launch", std::max<size_t>(1, g_.events.size())));
  line(fmt::format("uint64_t* targets[{}];   // per run-time-count event: count + 1 once set; else null", std::max<size_t>(1, g_.events.size())));
  line(fmt::format("uint64_t wait_count[{}];  // per event with a closed-form count, for this binding", std::max<size_t>(1, g_.events.size())));
  line(fmt::format("uint64_t* started[{}];   // early push: producers started per element; null when off", std::max<size_t>(1, g_.events.size())));
  line("// Per group, copies of its reads then its writes (set_views, before each launch): a body gets");
  line("// its buffers in place, rather than as an array built on the stack for every task.");
  line(fmt::format("DevBuffer views[{}];", std::max<int64_t>(1, total_views())));
  close("};");
  line("");
  line("// What one group's code refers to: class code reads its events and buffers from here.");
  open("struct GroupRef {");
  line("int group, cls;");
  line(fmt::format("int event[{}];   // unused entries are -1", max_refs_.events.size()));
  line(fmt::format("int buffer[{}];", max_refs_.buffers.size()));
  line("int views;      // the group's first entry in Params::views");
  close("};");
  line("");
}

void Emitter::emit_views() {
  line("// Each group's views of its buffers, from the buffers (shapes and data pointers).");
  open("EVT_HD inline void set_views(Params& p) {");
  line("(void)p;");
  int64_t at = 0;
  for (const ir::TaskGroup& group : g_.groups) {
    for (const auto* names : {&group.reads, &group.writes}) {
      for (const std::string& n : *names) line(fmt::format("p.views[{}] = p.buffers[{}];", at++, g_.buffer_index(n)));
    }
  }
  close();
}

void Emitter::emit_shapes() {
  const Scope s = dims_scope();
  line("// Buffer shapes from the dims (data pointers are the caller's).");
  open("EVT_HD inline void set_shapes(Params& p) {");
  line("(void)p;");
  for (size_t b = 0; b < g_.buffers.size(); ++b) {
    const auto& shape = g_.buffers[b].shape;
    line(fmt::format("p.buffers[{}].rank = {};", b, shape.size()));
    std::string numel = "int64_t{1}";
    for (size_t k = 0; k < shape.size(); ++k) {
      line(fmt::format("p.buffers[{}].shape[{}] = {};", b, k, expr(shape[k], s)));
      numel += fmt::format(" * p.buffers[{}].shape[{}]", b, k);
    }
    line(fmt::format("p.buffers[{}].numel = {};", b, numel));
  }
  for (size_t e = 0; e < g_.events.size(); ++e) {
    if (g_.events[e].wait.kind == ir::WaitCount::Kind::kRuntime) continue;
    line(fmt::format("p.wait_count[{}] = static_cast<uint64_t>({});", e, expr(g_.events[e].wait.count, s)));
  }
  close();
  emit_switch("int64_t event_elements([[maybe_unused]] const Params& p, int event)", "event", g_.events.size(),
              [&](size_t e) { return product_expr(g_.events[e].shape); }, "0");
  line("// The wait count of every element of an event; -1 for a run-time count.");
  emit_switch("int64_t event_target([[maybe_unused]] const Params& p, int event)", "event", g_.events.size(),
              [&](size_t e) {
                return g_.events[e].wait.kind == ir::WaitCount::Kind::kRuntime ? std::string("-1")
                                                                               : expr(g_.events[e].wait.count, s);
              },
              "-1");
  line("");
}

void Emitter::emit_group_geometry() {
  line("// Tile grids, task ids (group-major in file order) and coordinates.");
  emit_switch("int64_t group_tiles([[maybe_unused]] const Params& p, int group)", "group", g_.groups.size(),
              [&](size_t g) { return tiles_expr(g); }, "0");
  open("EVT_HD inline int64_t total_tasks(const Params& p) {");
  line("(void)p;");
  line(fmt::format("return {};", first_task_expr(g_.groups.size())));
  close();
  // Task ids are group-major in file order; decoding is straight-line, with no loop over groups.
  open("EVT_HD inline void task_group(const Params& p, int64_t task, int& group, int64_t& linear) {");
  line("(void)p;");
  std::vector<int> file_order(g_.groups.size());
  for (size_t g = 0; g < file_order.size(); ++g) file_order[g] = static_cast<int>(g);
  emit_decode(file_order, {}, {}, "task");
  close();
  emit_switch("int tile_rank(int group)", "group", g_.groups.size(),
              [&](size_t g) { return std::to_string(g_.groups[g].tiles.size()); }, "0");
  open("EVT_HD inline void unravel(const Params& p, int group, int64_t linear, int64_t* t) {");
  line("(void)p;");
  open("switch (group) {");
  for (size_t gi = 0; gi < g_.groups.size(); ++gi) {
    const auto& tiles = g_.groups[gi].tiles;
    open(fmt::format("case {}:", gi));
    for (size_t k = tiles.size(); k-- > 0;) {
      if (k == 0) {
        line("t[0] = linear;");
      } else {
        line(fmt::format("t[{}] = mk::floor_mod(linear, {});", k, extent(tiles, k)));
        line(fmt::format("linear = mk::floor_div(linear, {});", extent(tiles, k)));
      }
    }
    line("return;");
    --indent_;
  }
  line("default: return;");
  close();
  close();
  // The static order: the groups before the layers, the layered groups layer by layer, the rest;
  // inline groups run where their input completes instead.
  const auto split = group_order_.begin() + groups_before_layers_;
  open("EVT_HD inline int64_t static_positions(const Params& p) {");
  line("(void)p;");
  std::string positions = "int64_t{0}";
  for (int g : without_inline(group_order_.begin(), group_order_.end())) positions += " + " + tiles_expr(g);
  for (int g : without_inline(layer_order_.begin(), layer_order_.end())) positions += " + " + tiles_expr(g);
  line(fmt::format("return {};", positions));
  close();
  open("EVT_HD inline void static_task(const Params& p, int64_t position, int& group, int64_t& linear) {");
  line("(void)p;");
  emit_decode(without_inline(group_order_.begin(), split), without_inline(layer_order_.begin(), layer_order_.end()),
              without_inline(split, group_order_.end()), "position");
  close();
  emit_launches();
  // Source tasks: the groups that await nothing, which the dynamic queue starts with.
  // Under per-group scheduling only the dynamic groups' sources.
  line("template <mk::Schedule kS>");
  open("EVT_HD inline int64_t source_tasks(const Params& p) {");
  line("(void)p;");
  line("int64_t n = 0;");
  for (int sg : source_groups_) line(fmt::format("if (mk::runs_dynamic(kS, {})) n += group_tiles(p, {});", dynamic_flag(sg), sg));
  line("return n;");
  close();
  line("template <mk::Schedule kS>");
  open("EVT_HD inline int64_t source_task(const Params& p, int64_t ticket) {");
  for (int sg : source_groups_) {
    open(fmt::format("if (mk::runs_dynamic(kS, {})) {{", dynamic_flag(sg)));
    line(fmt::format("if (ticket < {}) return {} + ticket;", tiles_expr(sg), first_task_expr(sg)));
    line(fmt::format("ticket -= {};", tiles_expr(sg)));
    close();
  }
  line("(void)p;");
  line("return -1;");
  close();
  emit_switch("bool group_dynamic(int group)", "group", g_.groups.size(), [&](size_t g) { return dynamic_flag(g); },
              "false");
  // Events an inline group awaits: under the static schedule their notifiers read the count back,
  // to run the inline tasks when it completes an element.
  emit_switch("bool event_inline(int event)", "event", g_.events.size(), [&](size_t e) {
    for (size_t c = 0; c < g_.groups.size(); ++c) {
      if (is_inline(c) && g_.groups[c].in_edges[0].event == g_.events[e].name) return "true";
    }
    return "false";
  }, "false");
  // The inline group whose tile x an event's element x releases, or -1 (Emitter::inline_by_index).
  emit_switch("int inline_by_index(int event)", "event", g_.events.size(),
              [&](size_t e) { return std::to_string(inline_by_index(e)); }, "-1");
  // A streamed group whose tasks the loader learns of from the leader under the static and
  // kernels schedules: a range trigger decides, at the wait, whether a task runs, and its stream
  // may read the index buffers the trigger read; a StreamAfter::kWait stream reads what the wait
  // guards. A StreamAfter::kGuards stream is empty for a task a trigger skips: the loader waits
  // for what guards it (loader_wait) and needs no word.
  const auto stream_after = [&](size_t g) {
    const kernels::TileFunction& fn = *registry_.find(g_.groups[g].function);
    return fn.device_stream.empty() ? std::optional<kernels::StreamAfter>() : fn.stream_after;
  };
  emit_switch("bool group_announced(int group)", "group", g_.groups.size(), [&](size_t g) {
    const std::vector<ir::Edge>& in = g_.groups[g].in_edges;
    const bool triggered = std::any_of(in.begin(), in.end(), [](const ir::Edge& e) {
      return e.map.kind == ir::EdgeMap::Kind::kRangeTrigger;
    });
    const auto after = stream_after(g);
    const bool announced = after && (*after == kernels::StreamAfter::kWait ||
                                     (triggered && *after == kernels::StreamAfter::kNothing));
    return announced ? "true" : "false";
  }, "false");
  emit_switch("bool group_loader_waits(int group)", "group", g_.groups.size(), [&](size_t g) {
    return stream_after(g) == kernels::StreamAfter::kGuards ? "true" : "false";
  }, "false");
  line("");
}

void Emitter::emit_launches() {
  const size_t before = static_cast<size_t>(groups_before_layers_);
  const size_t after = group_order_.size() - before;
  const std::string layers = layer_order_.empty() ? "int64_t{0}" : expr(layers_, dims_scope());
  line("// Kernels mode, launch k: tiles [first, first + count) of one group.");
  open("EVT_HD inline int64_t launch_count(const Params& p) {");
  line("(void)p;");
  line(fmt::format("return {} + {} * {};", group_order_.size(), layers, layer_order_.size()));
  close();
  open("EVT_HD inline void launch_at(const Params& p, int64_t k, int& group, int64_t& first, int64_t& count) {");
  line("(void)p;");
  line("first = 0;");
  auto whole = [&](size_t from, size_t n) {
    open("switch (k) {");
    for (size_t i = 0; i < n; ++i) {
      const int g = group_order_[from + i];
      line(fmt::format("case {}: group = {}; count = {}; return;", i, g, tiles_expr(g)));
    }
    line("default: break;");
    close();
    line(fmt::format("k -= {};", n));
  };
  whole(0, before);
  if (!layer_order_.empty()) {
    open(fmt::format("if (k < {} * {}) {{", layers, layer_order_.size()));
    line(fmt::format("const int64_t layer = k / {};", layer_order_.size()));
    open(fmt::format("switch (k % {}) {{", layer_order_.size()));
    for (size_t i = 0; i < layer_order_.size(); ++i) {
      const int g = layer_order_[i];
      line(fmt::format("case {}: group = {}; count = {}; first = layer * count; return;", i, g, layer_tiles_expr(g)));
    }
    line("default: break;");
    close();
    close();
    line(fmt::format("k -= {} * {};", layers, layer_order_.size()));
  }
  whole(before, after);
  line("group = -1;");
  line("count = 0;");
  close();
}

// --- edges ------------------------------------------------------------------------------------

void Emitter::emit_edge_elements(const ir::Edge& edge, int group, const std::string& action,
                                 const std::string& abort_value) {
  const int ei = g_.event_index(edge.event);
  const ir::Event& ev = g_.events[ei];
  Scope s = dims_scope();
  for (size_t j = 0; j < edge.map.vars.size(); ++j) s.vars[edge.map.vars[j]] = fmt::format("t[{}]", j);
  int opened = 0;
  std::vector<std::string> coords;
  for (size_t k = 0; k < edge.map.coords.size(); ++k) {
    const ir::Coord& c = edge.map.coords[k];
    const std::string v = fmt::format("c{}_{}", k, loop_++);
    coords.push_back(v);
    switch (c.kind) {
      case ir::Coord::Kind::kSlice:
        open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0}) {{", v, extent(ev.shape, k)));
        ++opened;
        break;
      case ir::Coord::Kind::kScalar:
        if (ir::is_data_independent(c.expr)) {
          open("{");
        } else {  // a one-trip loop, so that `continue` skips just this coordinate's value
          open(fmt::format("for (int once_{0} = 0; once_{0} < 1; ++once_{0}) {{", loop_++));
        }
        ++opened;
        line(fmt::format("const int64_t {} = {};", v, expr(c.expr, s)));
        if (!ir::is_data_independent(c.expr)) line(fmt::format("if ({} < 0) continue;  // no event", v));
        break;
      case ir::Coord::Kind::kGather: {
        const int b = g_.buffer_index(c.buffer);
        std::string args;
        for (size_t d = 0; d < c.index.size(); ++d) {
          if (c.index[d].defined()) {
            args += ", " + expr(c.index[d], s);
          } else {
            const std::string iv = fmt::format("i{}_{}", d, loop_++);
            open(fmt::format("for (int64_t {0} = 0; {0} < p.buffers[{1}].shape[{2}]; ++{0}) {{", iv, buffer_ref(b), d));
            ++opened;
            args += ", " + iv;
          }
        }
        open("{");
        ++opened;
        line(fmt::format("const int64_t {} = mk::load_at(p.buffers[{}], {}{});", v, buffer_ref(b),
                         g_.buffers[b].dtype == ir::DType::kI64, args));
        line(fmt::format("if ({} < 0) continue;  // no event", v));
        break;
      }
    }
  }
  if (!edge.map.is_data_independent()) {
    // Data read at run time may point outside the event; the verifier proved the rest in range.
    std::string cond;
    for (size_t k = 0; k < coords.size(); ++k) {
      cond += fmt::format("{}{} >= {}", k ? " || " : "", coords[k], extent(ev.shape, k));
    }
    open(fmt::format("if ({}) {{", cond));
    line(fmt::format("mk::fail(w, a, mk::ErrorKind::kBadRange, {}, t, {}, {}, {}, 0);", group_ref(group),
                     g_.groups[group].tiles.size(), event_ref(ei), coords.empty() ? "0" : coords[0]));
    line(fmt::format("return {};", abort_value));
    close();
  }
  line(fmt::format("const int64_t x = {};", ravel(ev.shape, coords)));
  line(action);
  for (int k = 0; k < opened; ++k) close();
}

// Whether `edge` maps tile (v0, v1, ...) to element (v0, v1, ...) of an event of the tile grid's
// own shape, so that an element's linear index is its one consumer tile's.
bool Emitter::is_identity(const ir::TaskGroup& group, const ir::Edge& edge) const {
  const ir::Event& ev = g_.events[g_.event_index(edge.event)];
  const size_t n = edge.map.vars.size();
  if (edge.map.kind != ir::EdgeMap::Kind::kMap || edge.map.coords.size() != n || group.tiles.size() != n ||
      ev.shape.size() != n) {
    return false;
  }
  for (size_t k = 0; k < n; ++k) {
    const ir::Coord& c = edge.map.coords[k];
    if (c.kind != ir::Coord::Kind::kScalar) return false;
    const Expr e = ir::simplify(c.expr);
    if (!e.is_var() || e.name() != edge.map.vars[k] || extent(ev.shape, k) != extent(group.tiles, k)) return false;
  }
  return true;
}

std::string Emitter::sink_task(Sink sink, int consumer, const std::string& linear) const {
  if (sink == Sink::kInline) return fmt::format("mk::task_id({}, {})", consumer, linear);
  return fmt::format("{} + {}", first_task_expr(consumer), linear);
}

int Emitter::inline_by_index(size_t e) const {
  int found = -1;
  for (size_t c = 0; c < g_.groups.size(); ++c) {
    const ir::TaskGroup& group = g_.groups[c];
    for (const auto& in : group.in_edges) {
      if (in.event != g_.events[e].name || !is_inline(c)) continue;
      if (found >= 0 || group.in_edges.size() != 1 || !is_identity(group, in)) return -1;
      found = static_cast<int>(c);
    }
  }
  return found;
}

// The consumers of element `event_var` through `edge`: loops over the box of consumer tiles.
Status Emitter::emit_inverse(int consumer, const ir::Edge& edge, const std::string& event_var, Sink sink) {
  const ir::TaskGroup& group = g_.groups[consumer];
  const int ei = g_.event_index(edge.event);
  const ir::Event& ev = g_.events[ei];
  const Scope s = dims_scope();
  if (edge.map.kind == ir::EdgeMap::Kind::kRangeTrigger) {
    Scope es = s;
    open("{");
    const std::vector<std::string> coords = emit_element_coords(ev, event_var);
    for (size_t k = 0; k < coords.size(); ++k) es.vars[edge.map.vars[k]] = coords[k];
    line(fmt::format("const int64_t lo = {}, hi = {};", expr(edge.map.range_begin, es), expr(edge.map.range_end, es)));
    open(fmt::format("if (lo < 0 || hi > group_tiles(p, {}) || hi < lo) {{", consumer));
    line(fmt::format("mk::fail(w, a, mk::ErrorKind::kBadRange, {}, nullptr, 0, {}, {}, hi - lo);", consumer, ei, event_var));
    line("return;");
    close();
    if (ir::layer_offset(g_, group, edge)) {  // element (l, ...) releases tiles of layer l only
      line(fmt::format("const int64_t per_layer = {};", layer_tiles_expr(consumer)));
      open(fmt::format("if (hi > lo && (lo < {0} * per_layer || hi > ({0} + 1) * per_layer)) {{", coords[0]));
      line(fmt::format("mk::fail(w, a, mk::ErrorKind::kBadRange, {}, nullptr, 0, {}, {}, hi - lo);", consumer, ei,
                       event_var));
      line("return;");
      close();
    }
    line("if (hi > lo) mk::arrive(w, &a.state->range_released, static_cast<uint64_t>(hi - lo));");
    open(fmt::format("if ({} == 1) {{  // released once: push the whole range with one reservation", needed_expr(consumer)));
    line(fmt::format("mk::push_tasks(w, a, hi - lo, [&](int64_t k) {{ return {} + lo + k; }});", first_task_expr(consumer)));
    close("} else {");
    ++indent_;
    line(fmt::format("for (int64_t l = lo; l < hi; ++l) release_{}<W>(w, p, a, l);", consumer));
    close();
    close();
    return Status();
  }
  if (!edge.map.is_data_independent()) {
    return error("task group {}: in-edge {} is data-dependent without an inverse", group.name, edge.str());
  }
  if (is_identity(group, edge)) {
    // Element x is the one tile of the same index: no coordinates to take apart and put back
    // together (rope's and merge's inline release runs on the critical path of every layer).
    open("{");
    open(fmt::format("if ({} == 1) {{", needed_expr(consumer)));
    line(fmt::format("{}(w, a, 1, [&](int64_t) {{ return {}; }});", sink_name(sink), sink_task(sink, consumer, event_var)));
    close("} else {");
    ++indent_;
    line(fmt::format("release_{}<W>(w, p, a, {});", consumer, event_var));
    close();
    close();
    return Status();
  }
  // Per tile variable: the range of values that map onto the element. A pinned variable has at
  // most one (a coordinate is that variable plus a constant).
  std::vector<std::string> lo(edge.map.vars.size()), hi(edge.map.vars.size());
  std::vector<bool> pinned(edge.map.vars.size(), false);
  for (size_t j = 0; j < edge.map.vars.size(); ++j) {
    lo[j] = "int64_t{0}";
    hi[j] = extent(group.tiles, j);
  }
  std::vector<std::string> conditions;
  open("{");
  const std::vector<std::string> ecoord = emit_element_coords(ev, event_var);
  for (size_t k = 0; k < edge.map.coords.size(); ++k) {
    const ir::Coord& c = edge.map.coords[k];
    if (c.kind == ir::Coord::Kind::kSlice) continue;
    const Expr e = ir::simplify(c.expr);
    auto var_of = [&](const Expr& v) -> int {
      if (!v.is_var()) return -1;
      auto it = std::find(edge.map.vars.begin(), edge.map.vars.end(), v.name());
      return it == edge.map.vars.end() ? -1 : static_cast<int>(it - edge.map.vars.begin());
    };
    if (ir::is_data_independent(e)) {
      std::set<std::string> used;
      ir::collect_vars(e, used);
      const bool constant = std::none_of(edge.map.vars.begin(), edge.map.vars.end(),
                                         [&](const std::string& v) { return used.count(v); });
      if (constant) {
        conditions.push_back(fmt::format("{} == {}", ecoord[k], expr(e, s)));
        continue;
      }
    }
    // A tile variable plus a constant: the one value that maps onto the element, if in the grid.
    const auto shifted = [&]() -> std::optional<std::pair<size_t, int64_t>> {
      for (size_t j = 0; j < edge.map.vars.size(); ++j) {
        if (auto d = ir::constant_value(e - Expr::var(edge.map.vars[j]))) return std::make_pair(j, *d);
      }
      return std::nullopt;
    }();
    if (shifted) {
      const auto [j, d] = *shifted;
      const std::string v = d == 0 ? ecoord[k] : fmt::format("({} - {})", ecoord[k], d);
      lo[j] = fmt::format("mk::max_i({}, 0)", v);
      hi[j] = fmt::format("mk::min_i({} + 1, {})", v, extent(group.tiles, j));
      pinned[j] = true;
      continue;
    }
    if (e.op() == Op::kFloorDiv && e.args()[1].is_const() && e.args()[1].value() > 0) {
      if (int j = var_of(e.args()[0]); j >= 0) {
        const int64_t d = e.args()[1].value();
        lo[j] = fmt::format("({} * {})", ecoord[k], d);
        hi[j] = fmt::format("mk::min_i({} * {} + {}, {})", ecoord[k], d, d, extent(group.tiles, j));
        continue;
      }
    }
    return error("task group {}: in-edge {}: coordinate '{}' has no closed-form inverse, which dynamic "
                 "scheduling needs to find the tasks an event releases; use the static schedule",
                 group.name, edge.str(), c.expr.str());
  }
  std::string cond;
  for (const auto& c : conditions) cond += (cond.empty() ? "" : " && ") + c;
  if (!cond.empty()) open(fmt::format("if ({}) {{", cond));
  std::vector<std::string> vs;
  for (size_t j = 0; j < edge.map.vars.size(); ++j) {
    vs.push_back(fmt::format("v{}", j));
    line(fmt::format("const int64_t lo{0} = {1}, n{0} = mk::max_i({2} - lo{0}, 0);", j, lo[j], hi[j]));
  }
  // Tasks released once are pushed together, with one reservation; the others count releases.
  open(fmt::format("if ({} == 1) {{", needed_expr(consumer)));
  std::string count = "int64_t{1}";
  for (size_t j = 0; j < vs.size(); ++j) count += fmt::format(" * n{}", j);
  open(fmt::format("{}(w, a, {}, [&](int64_t k) {{", sink_name(sink), count));
  for (size_t j = vs.size(); j-- > 0;) {  // mk::floor_div: 32 bits where int64_t's / calls a subroutine
    if (pinned[j]) {  // n == 1 whenever there is a task at all: k % 1 is 0 and k / 1 is k
      line(fmt::format("const int64_t v{0} = lo{0};", j));
      continue;
    }
    line(fmt::format("const int64_t v{0} = lo{0} + mk::floor_mod(k, n{0});", j));
    line(fmt::format("k = mk::floor_div(k, n{});", j));
  }
  line(fmt::format("return {};", sink_task(sink, consumer, ravel(group.tiles, vs))));
  close("});");
  close("} else {");
  ++indent_;
  for (size_t j = 0; j < vs.size(); ++j) open(fmt::format("for (int64_t v{0} = lo{0}; v{0} < lo{0} + n{0}; ++v{0}) {{", j));
  line(fmt::format("release_{}<W>(w, p, a, {});", consumer, ravel(group.tiles, vs)));
  for (size_t j = 0; j < vs.size(); ++j) close();
  close();
  if (!cond.empty()) close();
  close();
  return Status();
}

// --- events and releases --------------------------------------------------------------------

void Emitter::emit_releases() {
  line("// Dynamic scheduling: a task is pushed once all its awaited elements (and ranges) fired.");
  for (size_t c = 0; c < g_.groups.size(); ++c) {
    line("template <class W>");
    open(fmt::format("EVT_HD inline void release_{}(W& w, const Params& p, const mk::LaunchArgs& a, int64_t linear) {{", c));
    line(fmt::format("const int64_t task = {} + linear;", first_task_expr(c)));
    line(fmt::format("const int64_t needed = {};", needed_expr(c)));
    line("if (needed == 1 || static_cast<int64_t>(mk::arrive(w, a.pending + task)) == needed) mk::push_task(w, a, task);");
    close();
  }
  line("");
}

Status Emitter::emit_fires() {
  line("// An element reached its count: release the tasks awaiting it that the ready queue runs.");
  for (size_t e = 0; e < g_.events.size(); ++e) {
    line("template <class W, mk::Schedule kS>");
    open(fmt::format("EVT_HD inline void fire_{}(W& w, const Params& p, const mk::LaunchArgs& a, int64_t x, bool plain, "
                     "bool ranges) {{",
                     e));
    line("(void)w; (void)p; (void)a; (void)x; (void)plain; (void)ranges;");
    for (size_t c = 0; c < g_.groups.size(); ++c) {
      for (const auto& in : g_.groups[c].in_edges) {
        if (in.event != g_.events[e].name) continue;
        line(fmt::format("// consumer {}, in-edge {}", g_.groups[c].name, in.map.str()));
        if (is_inline(c)) {
          // Static and per-group schedules: the notifying worker runs them next (the dynamic
          // schedule queues them like any other group, below).
          open("if (mk::runs_inline(kS) && plain) {");
          EVT_RETURN_IF_ERROR(emit_inverse(static_cast<int>(c), in, "x", Sink::kInline));
          close();
        }
        const bool range = in.map.kind == ir::EdgeMap::Kind::kRangeTrigger;
        open(fmt::format("if (mk::runs_dynamic(kS, {}) && {}) {{", dynamic_flag(c), range ? "ranges" : "plain"));
        const std::string before = out_;
        const int depth = indent_;
        Status s = emit_inverse(static_cast<int>(c), in, "x");
        if (!s.ok()) {
          if (g_.groups[c].schedule == ir::GroupSchedule::kDynamic) {
            return error("task group {} asks for schedule=dynamic, but {}", g_.groups[c].name, s.message());
          }
          // No dynamic schedule for the whole graph; per-group scheduling keeps this group static.
          out_ = before;
          indent_ = depth;
          line("// (no closed-form inverse: only per-group scheduling, with this group static)");
          if (dynamic_error_.empty()) dynamic_error_ = s.message();
        }
        close();
      }
    }
    close();
  }
  line("");
  return Status();
}

void Emitter::emit_events() {
  line("// Dispatch of a fired element to its event's consumers (dynamic scheduling): the plain ones,");
  line("// the range-triggered ones, or both.");
  line("template <class W, mk::Schedule kS>");
  open("EVT_HD inline void fire(W& w, const Params& p, const mk::LaunchArgs& a, int event, int64_t x, bool plain, bool ranges) {");
  open("switch (event) {");
  for (size_t e = 0; e < g_.events.size(); ++e) {
    line(fmt::format("case {0}: fire_{0}<W, kS>(w, p, a, x, plain, ranges); return;", e));
  }
  line("default: return;");
  close();
  close();
  line(R"CODE(
// Events are handled by one piece of code for all of them: the wait count of this binding is in
// Params, a run-time count in its target word.
// Wait (leader): until the element has all its notifications for this launch (a mk::Step).
template <class W>
EVT_HD inline int wait_event(W& w, const Params& p, const mk::LaunchArgs& a, int e, int64_t x, int group,
                             const int64_t* t, int rank, mk::Help* help) {
  uint64_t target = p.wait_count[e];
  if (kAnyRuntimeCount && p.targets[e]) {
    const int step = mk::wait_runtime_target(w, a, p.targets[e] + x, &target, group, t, rank, e, x, help);
    if (step != mk::kRun) return step;
  }
  return mk::wait_arrivals(w, a, p.counters[e] + x, target, group, t, rank, e, x, help);
}
// Notify (leader): one arrival, a relaxed add after the release fence the task's notify issued
// once for all its elements; when the ready queue runs some consumers, the last arrival fires the
// element (and whoever runs a consumer acquires: its wait's load, or the inline run's fence).
template <class W, mk::Schedule kS>
EVT_HD inline bool notify_event(W& w, const Params& p, const mk::LaunchArgs& a, int e, int64_t x, int group,
                                const int64_t* t, int rank) {
  if constexpr (kS == mk::kStatic || kS == mk::kKernels) {
    // Nothing to release: a fire-and-forget add; the waiter checks for too many arrivals. Except
    // that the notification completing an element an inline group awaits runs that group next.
    if (kS == mk::kKernels || !event_inline(e)) {
      w.fetch_add_relaxed(p.counters[e] + x, 1);
      return true;
    }
    // An element of one arrival (attention's one KV split at larger batches) completes with this
    // one, so the add's value need not come back: that round trip was the whole hand-off.
    const uint64_t got = p.wait_count[e] == 1 ? 1 : w.fetch_add_relaxed(p.counters[e] + x, 1) + 1;
    if (got != p.wait_count[e]) return true;
    // The inline tile of the element's own index needs no search through the event's consumers.
    if (kAllInlineByIndex || inline_by_index(e) >= 0) {
      mk::queue_inline(w, a, 1, [&](int64_t) { return mk::task_id(inline_by_index(e), x); });
    } else {
      fire<W, kS>(w, p, a, e, x, true, false);
    }
    return true;
  } else {
    const uint64_t got = w.fetch_add_relaxed(p.counters[e] + x, 1) + 1;
    uint64_t target = p.wait_count[e];
    if (kAnyRuntimeCount && p.targets[e]) {
      // The verifier ordered the setter before every notifier, so the count is set (as count + 1).
      const uint64_t stored = w.load_acquire(p.targets[e] + x);
      target = stored == 0 ? 0 : stored - 1;
    }
    if (got > target) {
      mk::fail(w, a, mk::ErrorKind::kOverNotified, group, t, rank, e, x,
               static_cast<int64_t>(target) - static_cast<int64_t>(got));
      return false;
    }
    // Under early push the plain consumers were pushed when the last producer started.
    if (got == target) fire<W, kS>(w, p, a, e, x, p.started[e] == nullptr, true);
    return true;
  }
}
// Early push (leader, dynamic schedules): once every producer of the element has started, its
// plain consumers are pushed, so they are popped while the producers still run and their own
// wait covers the rest. No deadlock: the tasks they wait for are all running.
template <class W, mk::Schedule kS>
EVT_HD inline void start_event(W& w, const Params& p, const mk::LaunchArgs& a, int e, int64_t x) {
  if (mk::arrive(w, p.started[e] + x) == p.wait_count[e]) fire<W, kS>(w, p, a, e, x, true, false);
}
// A run-time wait count, set by a tile body.
template <class W, mk::Schedule kS>
EVT_HD inline void set_count(W& w, const Params& p, const mk::LaunchArgs& a, int e, int64_t x, int64_t count) {
  if (!p.targets[e] || x < 0 || x >= event_elements(p, e) || count < 0) {
    mk::fail(w, a, mk::ErrorKind::kBadRange, -1, nullptr, 0, e, x, count);
    return;
  }
  w.store_release(p.targets[e] + x, static_cast<uint64_t>(count) + 1);
  if (kS == mk::kDynamic || kS == mk::kPerGroup) {
    if (count == 0) fire<W, kS>(w, p, a, e, x, true, true);
  }
}
)CODE");
}

// --- groups -------------------------------------------------------------------------------------

void Emitter::emit_groups() {
  // Each group's code is emitted with run-time references; groups with the same text are a class.
  std::vector<std::string> texts;
  std::vector<std::vector<int>> members;
  group_refs_.assign(g_.groups.size(), {});
  class_of_.assign(g_.groups.size(), -1);
  for (size_t gi = 0; gi < g_.groups.size(); ++gi) {
    std::string saved = std::move(out_);
    out_.clear();
    refs_ = &group_refs_[gi];
    loop_ = 0;  // fresh names restart per group, so equal structure gives equal text
    emit_group_code(gi);
    refs_ = nullptr;
    std::string text = std::exchange(out_, std::move(saved));
    auto it = std::find(texts.begin(), texts.end(), text);
    if (it == texts.end()) {
      texts.push_back(std::move(text));
      members.emplace_back();
      it = texts.end() - 1;
    }
    class_of_[gi] = static_cast<int>(it - texts.begin());
    members[class_of_[gi]].push_back(static_cast<int>(gi));
  }
  classes_ = texts.size();
  for (const std::vector<int>& m : members) class_fn_.push_back(registry_.find(g_.groups[m[0]].function));
  max_refs_ = Refs{{-1}, {-1}};
  for (const Refs& r : group_refs_) {
    if (r.events.size() > max_refs_.events.size()) max_refs_.events.resize(r.events.size(), -1);
    if (r.buffers.size() > max_refs_.buffers.size()) max_refs_.buffers.resize(r.buffers.size(), -1);
  }
  for (size_t k = 0; k < classes_; ++k) {
    const std::vector<int>& m = members[k];
    std::string names;
    for (size_t i = 0; i < m.size() && i < 4; ++i) names += (i ? ", " : "") + g_.groups[m[i]].name;
    if (m.size() > 4) names += fmt::format(", ... ({} groups)", m.size());
    const ir::TaskGroup& first = g_.groups[m[0]];
    line(fmt::format("// class {}: {} over a rank-{} tile grid; groups {}", k, first.function, first.tiles.size(), names));
    std::string text = texts[k];
    for (size_t at = text.find("@K@"); at != std::string::npos; at = text.find("@K@", at)) {
      text.replace(at, 3, std::to_string(k));
    }
    out_ += text;
  }
}

void Emitter::emit_group_code(size_t gi) {
  const ir::TaskGroup& group = g_.groups[gi];
  const int rank = static_cast<int>(group.tiles.size());
  const kernels::TileFunction* fn = registry_.find(group.function);

  // The Block a body sees: the worker's threads, plus the group's run-time count setters.
  line("template <class W, mk::Schedule kS>");
  open("struct Block@K@ {");
  emit_block_members();
  open("EVT_HD void set_wait_count(int slot, int64_t element, int64_t count) const {");
  line("(void)element; (void)count;");
  for (size_t k = 0; k < group.sets.size(); ++k) {
    line(fmt::format("if (slot == {}) set_count<W, kS>(w, p, a, {}, element, count);", k,
                     event_ref(g_.event_index(group.sets[k]))));
  }
  close();
  close("};");

  // Wait (leader).
  line("template <class W, mk::Schedule kS>");
  open("EVT_HD inline int wait_class_@K@(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r, "
       "const int64_t* t, int64_t linear, mk::Help* help) {");
  line("(void)w; (void)p; (void)a; (void)r; (void)t; (void)linear; (void)help;");
  auto wait_on = [&](const ir::Edge& in, const std::string& element) {
    return fmt::format("if (const int s = wait_event(w, p, a, {}, {}, {}, t, {}, help); s != mk::kRun) return s;",
                       event_ref(g_.event_index(in.event)), element, group_ref(static_cast<int>(gi)), rank);
  };
  auto wait_action = [&](const ir::Edge& in) { return wait_on(in, "x"); };
  // A single-element trigger's one element for the task: its layer's, or the event's only one.
  auto single_element = [&](const ir::Edge& in) {
    line(std::string("const int64_t found = ") + (ir::layer_offset(g_, group, in) ? "t[0]" : "0") + ";");
  };
  auto edge_comment = [&](const char* what, const ir::Edge& e) {
    line(fmt::format("// {} {}: \"{}\"", what, event_ref(g_.event_index(e.event)), e.map.str()));
  };
  // Kernel boundaries synchronize the kernels mode: it waits on nothing.
  open("if constexpr (kS != mk::kKernels) {");
  for (const auto& in : group.in_edges) {
    if (in.map.kind != ir::EdgeMap::Kind::kMap || !in.map.is_data_independent()) continue;
    edge_comment("in-edge", in);
    emit_edge_elements(in, static_cast<int>(gi), wait_action(in), "mk::kAbort");
  }
  close();
  for (const auto& in : group.in_edges) {
    if (in.map.kind != ir::EdgeMap::Kind::kRangeTrigger) continue;
    const ir::Event& ev = *g_.find_event(in.event);
    edge_comment("range trigger", in);
    line("// Dynamic scheduling pushed this task when a range covered it; the static schedule finds the");
    line("// covering element itself, now that the index buffers are ready.");
    open(fmt::format("if constexpr (!mk::runs_dynamic(kS, {})) {{", dynamic_flag(gi)));
    // The elements to look through: only the task's layer's when the trigger keeps the layer.
    const bool per_layer = ir::layer_offset(g_, group, in).has_value();
    // An element's range, as `begin` and `end`, then `use`, in a block of its own. bind_coords
    // declares the element's coordinates (if it must) and names them in the scope.
    const auto emit_range = [&](const auto& bind_coords, const std::string& use) {
      open("{");
      Scope es = dims_scope();
      bind_coords(es);
      line(fmt::format("const int64_t begin = {}, end = {};", expr(in.map.range_begin, es),
                       expr(in.map.range_end, es)));
      line("(void)end;");
      line(use);
      close();
    };
    // Element x's range, its coordinates unraveled from x.
    const auto range_of = [&](const std::string& x, const std::string& use) {
      emit_range([&](Scope& es) {
        const std::vector<std::string> coords = emit_element_coords(ev, x);
        for (size_t k = 0; k < coords.size(); ++k) es.vars[in.map.vars[k]] = coords[k];
      }, use);
    };
    if (ir::single_element_trigger(g_, group, in)) {
      // One element can cover the task: wait for it first and read its range after, so the index
      // buffers need no other event to guard them (its producer wrote them before it fired).
      single_element(in);
      open("if constexpr (kS != mk::kKernels) {");
      line(wait_on(in, "found"));
      close();
      range_of("found", "if (linear < begin || linear >= end) return mk::kSkip;");
      close();
      continue;
    }
    line("int64_t found = -1;");
    if (per_layer) {
      line(fmt::format("const int64_t count = {}, first = t[0] * count;",
                       product_expr(std::vector<Expr>(ev.shape.begin() + 1, ev.shape.end()))));
    } else {
      line(fmt::format("const int64_t count = {}, first = 0;", product_expr(ev.shape)));
    }
    // Ranges that abut along the one coordinate searched (end(e) is begin(e + 1), as a table of
    // prefix sums gives) rise, since none is reversed: a binary search finds the covering one.
    const std::string last = in.map.vars.back();
    const bool abutting = ev.shape.size() == (per_layer ? 2u : 1u) &&
                          ir::provably_equal(ir::substitute(in.map.range_begin, last, Expr::var(last) + 1),
                                             in.map.range_end);
    if (abutting) {
      // The search runs along the last coordinate, j; the layer, when kept, is the task's own. It is
      // 4-ary: a round loads 3 probes' ranges together and counts those that begin at or before the
      // task, so that 128 elements take four dependent rounds of loads instead of halving's seven,
      // each a round trip to the L2 while the weights stream. Wider rounds gain nothing: ptxas
      // issues their loads a few at a time in the leader's register budget.
      const auto range_at = [&](const std::string& j, const std::string& use) {
        emit_range([&](Scope& es) {
          if (per_layer) es.vars[in.map.vars[0]] = "t[0]";
          es.vars[last] = j;
        }, use);
      };
      constexpr int kProbes = 3;  // a round's
      line("int64_t lo = 0, hi = count - 1;  // the last j whose range begins at or before the task");
      open("while (lo < hi) {");
      line(fmt::format("const int64_t step = (hi - lo) / {} + 1;", kProbes + 1));
      line(fmt::format("int64_t begins[{}];", kProbes));
      line("EVT_UNROLL");
      open(fmt::format("for (int k = 0; k < {}; ++k) {{", kProbes));
      line("const int64_t j = kernels::min_of(lo + (k + 1) * step, hi);");
      range_at("j", "begins[k] = begin;");
      close();
      line("int64_t below = 0;  // a prefix of the probes, since the ranges rise");
      line("EVT_UNROLL");
      line(fmt::format("for (int k = 0; k < {}; ++k) below += begins[k] <= linear;", kProbes));
      line("const int64_t next = below == 0 ? lo : kernels::min_of(lo + below * step, hi);");
      line("hi = kernels::min_of(next + step - 1, hi);");
      line("lo = next;");
      close();
      open("if (count > 0) {");
      range_at("lo", "if (begin <= linear && linear < end) found = first + lo;");
      close();
    } else {
      open("for (int64_t x = first; x < first + count && found < 0; ++x) {");
      range_of("x", "if (begin <= linear && linear < end) found = x;");
      close();
    }
    line("if (found < 0) return mk::kSkip;");
    open("if constexpr (kS != mk::kKernels) {");
    line(wait_on(in, "found"));
    close();
    close();
  }
  for (const auto& in : group.in_edges) {
    if (in.map.kind != ir::EdgeMap::Kind::kMap || in.map.is_data_independent()) continue;
    edge_comment("data-dependent in-edge (static scheduling only)", in);
    open("if constexpr (kS != mk::kKernels) {");
    emit_edge_elements(in, static_cast<int>(gi), wait_action(in), "mk::kAbort");
    close();
  }
  line("return mk::kRun;");
  close();

  // The loader's wait (static schedule) before it computes a StreamAfter::kGuards stream: the
  // data-independent in-edges and a single-element trigger, which guard what the stream reads;
  // the leader waits for the rest (a searched trigger's element) while the ring fills.
  if (fn->stream_after == kernels::StreamAfter::kGuards) {
    line("template <class W, mk::Schedule kS>");
    open("EVT_HD inline int loader_wait_class_@K@(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r, "
         "const int64_t* t) {");
    line("(void)w; (void)p; (void)a; (void)r; (void)t;");
    line("mk::Help* const help = nullptr;  // the loader runs no other tasks meanwhile");
    for (const auto& in : group.in_edges) {
      if (!ir::waited_by_tile(g_, group, in)) continue;
      if (in.map.kind == ir::EdgeMap::Kind::kMap) {
        edge_comment("in-edge", in);
        emit_edge_elements(in, static_cast<int>(gi), wait_action(in), "mk::kAbort");
      } else {
        edge_comment("range trigger, its one element", in);
        open("{");
        single_element(in);
        line(wait_on(in, "found"));
        close();
      }
    }
    line("return mk::kRun;");
    close();
  }

  // Body (every thread of the block), and the prologue (every thread, before the waits), which
  // loads what no awaited event guards.
  const std::string views = fmt::format("const DevBuffer* reads = p.views + r.views; const DevBuffer* writes = reads + {};",
                                        group.reads.size());
  auto call = [&](const char* what, const std::string& function) {
    line("template <class W, mk::Schedule kS>");
    open(fmt::format("EVT_HD inline void {}_class_@K@(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r, "
                     "const int64_t* t) {{",
                     what));
    if (function.empty()) {
      line("(void)w; (void)p; (void)a; (void)r; (void)t;");
    } else {
      line(views);
      line(fmt::format("{}(Block@K@<W, kS>{{w, p, a, r}}, t, reads, writes);", function));
    }
    close();
  };
  call("prologue", fn->device_prologue);
  if (!fn->device_task.empty()) {
    // The shared task (emit_shared_dispatch runs it and asks it for the weight stream).
    line("template <class W, mk::Schedule kS>");
    open(fmt::format("EVT_HD inline {} task_class_@K@(const Params& p, const GroupRef& r, const int64_t* t) {{",
                     fn->shared.type));
    line(views);
    line(fmt::format("return {}(t, reads, writes);", fn->device_task));
    close();
  } else {
    call("body", fn->device_body);
    // The weight stream (every thread that asks, the loader's lane among them): the chunks the
    // body will acquire.
    line("template <class W, mk::Schedule kS>");
    open("EVT_HD inline kernels::WeightStream stream_class_@K@(W& w, const Params& p, const mk::LaunchArgs& a, "
         "const GroupRef& r, const int64_t* t) {");
    if (fn->device_stream.empty()) {
      line("(void)w; (void)p; (void)a; (void)r; (void)t;");
      line("return kernels::WeightStream{};");
    } else {
      line(views);
      line(fmt::format("return {}(Block@K@<W, kS>{{w, p, a, r}}, t, reads, writes);", fn->device_stream));
    }
    close();
  }

  // Notify (leader).
  line("template <class W, mk::Schedule kS>");
  open("EVT_HD inline bool notify_class_@K@(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r, "
       "const int64_t* t) {");
  line("(void)w; (void)p; (void)a; (void)r; (void)t;");
  open("if constexpr (kS != mk::kKernels) {  // kernel boundaries synchronize the kernels mode");
  if (!group.out_edges.empty()) line("w.fence_release();  // publishes the block's writes to every element below");
  for (const auto& out : group.out_edges) {
    edge_comment("out-edge", out);
    emit_edge_elements(out, static_cast<int>(gi),
                       fmt::format("if (!notify_event<W, kS>(w, p, a, {}, x, {}, t, {})) return false;",
                                   event_ref(g_.event_index(out.event)), group_ref(static_cast<int>(gi)), rank),
                       "false");
  }
  close();
  line("return true;");
  close();

  // Push early (leader, after the wait): the consumers of the elements it will notify.
  line("template <class W, mk::Schedule kS>");
  open("EVT_HD inline void push_early_class_@K@(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r, "
       "const int64_t* t) {");
  line("(void)w; (void)p; (void)a; (void)r; (void)t;");
  for (const auto& out : group.out_edges) {
    if (!out.map.is_data_independent()) continue;
    const std::string e = event_ref(g_.event_index(out.event));
    edge_comment("out-edge", out);
    open(fmt::format("if (p.started[{}]) {{", e));
    emit_edge_elements(out, static_cast<int>(gi), fmt::format("start_event<W, kS>(w, p, a, {}, x);", e), "");
    close();
  }
  close();
  line("");
}

void Emitter::emit_block_members() {
  line("static constexpr int kPassSets = W::kPassSets;");
  line("W& w;");
  line("const Params& p;");
  line("const mk::LaunchArgs& a;");
  line("const GroupRef& r;");
  line("EVT_HD int thread() const { return w.thread(); }");
  line("EVT_HD int threads() const { return w.threads(); }");
  line("EVT_HD void sync() const { w.sync(); }");
  line("EVT_HD kernels::Scratch scratch() const { return w.scratch(); }");
  line("EVT_HD auto weights(const kernels::WeightStream& s) const { return w.weights(s); }");
}

void Emitter::emit_shared_dispatch(const std::string& ret, const std::string& what, const std::string& name,
                                   const std::string& fallback, const std::vector<bool>& keep) {
  // The shared tasks, in order of first use, and the classes that build each.
  std::vector<const kernels::SharedTask*> shared;
  std::vector<std::vector<size_t>> users;
  for (size_t k = 0; k < classes_; ++k) {
    if (!keep[k] || class_fn_[k]->device_task.empty()) continue;
    const kernels::SharedTask& st = class_fn_[k]->shared;
    auto same = [&](const kernels::SharedTask* o) { return o->type == st.type && o->run == st.run && o->stream == st.stream; };
    auto it = std::find_if(shared.begin(), shared.end(), same);
    if (it == shared.end()) {
      it = shared.insert(shared.end(), &st);
      users.emplace_back();
    }
    users[static_cast<size_t>(it - shared.begin())].push_back(k);
  }
  line("template <class W, mk::Schedule kS>");
  open(fmt::format("EVT_HD inline {} {}(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r, "
                   "const int64_t* t) {{",
                   ret, name));
  line("(void)w; (void)p; (void)a; (void)t;");
  open("switch (r.cls) {");
  for (size_t k = 0; k < classes_; ++k) {
    if (keep[k] && class_fn_[k]->device_task.empty()) {
      line(fmt::format("case {}: return {}_class_{}<W, kS>(w, p, a, r, t);", k, what, k));
    }
  }
  // Each shared task's classes meet at one call. Nothing after the inner switch depends on which
  // case ran, so the compiler has no reason to copy the call (and the runner inlined into it)
  // back into the cases.
  for (size_t s = 0; s < shared.size(); ++s) {
    std::string labels;
    for (size_t k : users[s]) labels += fmt::format("case {}: ", k);
    open(labels + "{");
    line(fmt::format("{} task;", shared[s]->type));
    open("switch (r.cls) {");
    for (size_t i = 0; i < users[s].size(); ++i) {
      const size_t k = users[s][i];
      line(fmt::format("{}: task = task_class_{}<W, kS>(p, r, t); break;",
                       i + 1 < users[s].size() ? fmt::format("case {}", k) : std::string("default"), k));
    }
    close();
    line(fmt::format("return {}(SharedBlock<W, kS>{{w, p, a, r}}, task);",
                     what == "body" ? shared[s]->run : shared[s]->stream));
    close();
  }
  line(fmt::format("default: return {};", fallback));
  close();
  close();
}

void Emitter::emit_dispatch_and_loops() {
  // The Block a shared task runs on (emit_shared_dispatch): the same for every class that shares
  // it, so that its runner is one instantiation.
  line("template <class W, mk::Schedule kS>");
  open("struct SharedBlock {");
  emit_block_members();
  close("};");
  // Every group's references; computed before the wait, so off the critical path.
  open("EVT_HD inline GroupRef group_ref(int group) {");
  open("switch (group) {");
  for (size_t gi = 0; gi < g_.groups.size(); ++gi) {
    auto list = [](const std::vector<int>& v, size_t n) {
      std::string s;
      for (size_t k = 0; k < n; ++k) s += fmt::format("{}{}", k ? ", " : "", k < v.size() ? v[k] : -1);
      return s;
    };
    line(fmt::format("case {}: return GroupRef{{{}, {}, {{{}}}, {{{}}}, {}}};", gi, gi, class_of_[gi],
                     list(group_refs_[gi].events, max_refs_.events.size()),
                     list(group_refs_[gi].buffers, max_refs_.buffers.size()), view_offset(gi)));
  }
  line("default: return GroupRef{-1, -1, {}, {}, 0};");
  close();
  close();
  line("// One dispatch over classes of task groups.");
  const std::vector<bool> every_class(classes_, true);
  // Over the classes `which` holds; the others take the fallback.
  auto dispatch = [&](const std::string& ret, const std::string& name, const std::string& params, const std::string& args,
                      const std::string& fallback, const std::vector<bool>& which) {
    line("template <class W, mk::Schedule kS>");
    open(fmt::format("EVT_HD inline {} {}(W& w, const Params& p, const mk::LaunchArgs& a, const GroupRef& r{}) {{", ret,
                     name, params));
    open("switch (r.cls) {");
    for (size_t k = 0; k < classes_; ++k) {
      if (which[k]) line(fmt::format("case {}: return {}_class_{}<W, kS>(w, p, a, r{});", k, name, k, args));
    }
    line(fmt::format("default: return {};", fallback));
    close();
    close();
  };
  dispatch("int", "wait", ", const int64_t* t, int64_t linear, mk::Help* help", ", t, linear, help", "mk::kAbort",
           every_class);
  // The loader's: the classes of StreamAfter::kGuards streams (load_task calls it for no other).
  std::vector<bool> guarded_classes(classes_, false);
  for (size_t k = 0; k < classes_; ++k) guarded_classes[k] = class_fn_[k]->stream_after == kernels::StreamAfter::kGuards;
  dispatch("int", "loader_wait", ", const int64_t* t", ", t", "mk::kRun", guarded_classes);
  dispatch("void", "prologue", ", const int64_t* t", ", t", "", every_class);
  emit_shared_dispatch("void", "body", "body", "", every_class);
  emit_shared_dispatch("kernels::WeightStream", "stream", "stream", "kernels::WeightStream{}", every_class);
  // What run_task's inline instantiation calls: only the classes of inline groups, so that the
  // other bodies are not inlined into the kernel a second time.
  std::vector<bool> inline_classes(classes_, false);
  for (size_t gi = 0; gi < g_.groups.size(); ++gi) {
    if (is_inline(gi)) inline_classes[static_cast<size_t>(class_of_[gi])] = true;
  }
  emit_shared_dispatch("void", "body", "inline_body", "", inline_classes);
  dispatch("bool", "notify", ", const int64_t* t", ", t", "false", every_class);
  dispatch("void", "push_early", ", const int64_t* t", ", t", "", every_class);
  line("");
  line(R"CODE(// A task as the leader announces it to the loader (mk::task_id), with kSkipped set for a task that
// turned out to have nothing to do.
inline constexpr int64_t kSkipped = int64_t{1} << 62;

// Whether the loader decodes the static order's tasks and the consumers take them from it
// (W::kLoaderDecodes): the loader posts each task and the consumers take it under the same
// condition, or one side waits for the other until the launch times out.
template <class W, mk::Schedule kS>
inline constexpr bool kLoaderDecodes = kS == mk::kStatic && kHasStreams && W::kLoaderDecodes;

// The loader fills the ring with one task's weight stream; false when the launch aborted. Under
// the static schedule it first hands the consumers the task it decoded (kLoaderDecodes). Under
// the static and kernels schedules a range-triggered group's task waits for the leader's word.
template <class W, mk::Schedule kS>
EVT_HD inline bool load_task(W& w, const Params& p, const mk::LaunchArgs& a, int group, int64_t linear) {
  int64_t t[4] = {};
  unravel(p, group, linear, t);
  if constexpr (kLoaderDecodes<W, kS>) {
    if (!w.post_task(group, linear, t)) return false;
  }
  if ((kS == mk::kStatic || kS == mk::kKernels) && group_announced(group)) {
    const int64_t word = w.next_announced();
    if (word == mk::kAnnounceStop) return false;
    if (word & kSkipped) return true;
  }
  if (kS == mk::kStatic && group_loader_waits(group) && loader_wait<W, kS>(w, p, a, group_ref(group), t) != mk::kRun) {
    return false;
  }
  return w.load(stream<W, kS>(w, p, a, group_ref(group), t), kS == mk::kStatic && !group_announced(group));
})CODE");
  line("");
  line(R"CODE(// Runs one task on the whole block: the leader waits, every thread runs the body, the leader
// notifies. Two block barriers per task: one shares the wait's outcome, one ends the body. A
// failed notify leaves `healthy` false on the leader, and its next step is an abort; the launch
// already recorded the error. False when the launch aborted.
// kHelps (per-group scheduling, static tasks): while the wait spins, the block runs ready tasks
// of the dynamic groups, then reloads this task's prologue, which they may have overwritten.
// Weight streams: under the static and kernels schedules the loader follows the same sequence of
// tasks on its own, except that a range-triggered task's stream may read index buffers ready only
// once it waited, and it may be skipped: the leader announces whether it runs after its wait.
// Under the dynamic schedule the leader announces a popped task before its wait (the loader fills
// the ring while it waits), under per-group scheduling just before its body (a wait may run other
// tasks first).
template <class W, mk::Schedule kS>
EVT_HD inline bool run_queued(W& w, const Params& p, const mk::LaunchArgs& a, int64_t task, bool& healthy,
                              int64_t sources);

template <class W, mk::Schedule kS, bool kHelps = false, bool kInline = false>
EVT_HD inline bool run_tile(W& w, const Params& p, const mk::LaunchArgs& a, int group, int64_t linear, const int64_t* t,
                            bool& healthy, int64_t sources = 0) {
  const GroupRef r = group_ref(group);
  uint64_t start = 0, waited = 0;
  if constexpr (kHasStreams && kS == mk::kDynamic) {
    if (w.leader()) w.announce(mk::task_id(group, linear));
  }
  while (true) {
    // The prologue's loads overlap the wait; share() below is the barrier before the body.
    prologue<W, kS>(w, p, a, r, t);
    mk::Help help{sources};
    int64_t step = mk::kRun;
    if (w.leader()) {
      if (a.trace) start = w.now_ns();
      if (!healthy) {
        step = mk::kAbort;
      } else if constexpr (kInline) {
        // Its one element completed with this leader's own arrival (the value its add returned),
        // so reading the counter back would only cost a round trip: an acquire fence receives
        // the other notifiers' writes as the wait's acquire load would.
        w.fence_acquire();
      } else {
        step = wait<W, kS>(w, p, a, r, t, linear, kHelps ? &help : nullptr);
      }
      if (a.trace) waited = w.now_ns();
      if (step == mk::kHelp) step = ~help.ticket;  // negative: the ticket to run first
    }
    step = w.share(step);
    if (step == mk::kAbort) return false;
    if constexpr (kHasStreams && (kS == mk::kStatic || kS == mk::kKernels)) {
      if (group_announced(group) && w.leader() && (step == mk::kRun || step == mk::kSkip)) {
        w.announce(mk::task_id(group, linear) | (step == mk::kSkip ? kSkipped : 0));
      }
    }
    if (step == mk::kSkip) return true;
    if (step == mk::kRun) break;
    if constexpr (kHelps) {
      int64_t task = -1;
      if (w.leader()) {
        task = mk::ticket_task(w, a, sources, w.count(), ~step, [&](int64_t k) { return source_task<kS>(p, k); });
      }
      task = w.share(task);
      if (task < 0 || !run_queued<W, kS>(w, p, a, task, healthy, sources)) return false;
    }
  }
  if constexpr (kS == mk::kDynamic || kS == mk::kPerGroup) {
    if (w.leader()) push_early<W, kS>(w, p, a, r, t);  // the other threads begin the body meanwhile
  }
  if constexpr (kHasStreams && kS == mk::kPerGroup) {
    if (w.leader()) w.announce(mk::task_id(group, linear));
  }
  if constexpr (kInline) {
    inline_body<W, kS>(w, p, a, r, t);
  } else {
    body<W, kS>(w, p, a, r, t);
  }
  w.sync();
  if (w.leader()) {
    healthy = notify<W, kS>(w, p, a, r, t);
    if (a.trace) {  // one branch when tracing is off
      mk::trace_task(w, a.trace, a.trace_tasks_per_worker, group, linear, start, waited);
    }
  }
  return true;
}

// run_tile of a task whose tile coordinates are still to be found.
template <class W, mk::Schedule kS, bool kHelps = false, bool kInline = false>
EVT_HD inline bool run_task(W& w, const Params& p, const mk::LaunchArgs& a, int group, int64_t linear, bool& healthy,
                            int64_t sources = 0) {
  int64_t t[4] = {};
  unravel(p, group, linear, t);
  return run_tile<W, kS, kHelps, kInline>(w, p, a, group, linear, t, healthy, sources);
}

// Runs the inline tasks the last task released (and those they release in turn), on the whole
// block; the leader holds the list. False when the launch aborted.
template <class W, mk::Schedule kS>
EVT_HD inline bool run_inline(W& w, const Params& p, const mk::LaunchArgs& a, bool& healthy) {
  if constexpr (mk::runs_inline(kS)) {
    while (true) {
      int64_t task = -1;
      if (w.leader()) task = w.next_inline();
      task = w.share(task);
      if (task < 0) return true;
      if (!run_task<W, kS, false, true>(w, p, a, mk::task_id_group(task), mk::task_id_linear(task), healthy)) {
        return false;
      }
    }
  }
  return true;
}

// Under per-group scheduling every worker counts itself finished once through its static tasks.
template <mk::Schedule kS, class W>
EVT_HD inline int64_t static_workers(const W& w) {
  return kS == mk::kPerGroup ? w.count() : 0;
}

// Runs a task taken from the ready queue and counts it finished, after the pushes it made.
template <class W, mk::Schedule kS>
EVT_HD inline bool run_queued(W& w, const Params& p, const mk::LaunchArgs& a, int64_t task, bool& healthy,
                              int64_t sources) {
  int group;
  int64_t linear;
  task_group(p, task, group, linear);
  const bool ok = run_task<W, kS>(w, p, a, group, linear, healthy) && run_inline<W, kS>(w, p, a, healthy);
  if (w.leader()) mk::count_finished(w, a, sources, static_workers<kS>(w));
  return ok;
}

// The megakernel's worker loop. Static groups: this worker's positions of the static order, in
// order (the dynamic groups' positions are skipped). Dynamic groups: pop, run, notify (which
// pushes what it released) until the launch is over; under per-group scheduling a worker comes
// here once through its static tasks.
template <class W, mk::Schedule kS>
EVT_HD inline void run_megakernel(W& w, const Params& p, const mk::LaunchArgs& a) {
  mk::zero_next_arena(w, a);
  bool healthy = true;
  const int64_t sources = source_tasks<kS>(p);
  if constexpr (kS != mk::kDynamic) {
    const int64_t total = static_positions(p);
    uint32_t k = 0;  // this worker's k-th position
    for (int64_t position = w.id(); position < total; position += w.count(), ++k) {
      int group;
      int64_t linear, t[4] = {};
      if constexpr (kLoaderDecodes<W, kS>) {
        if (!w.take_task(k, group, linear, t)) return;  // the loader decoded it (run_loader)
      } else {
        static_task(p, position, group, linear);
        unravel(p, group, linear, t);
      }
      if (mk::runs_dynamic(kS, group_dynamic(group))) continue;
      if (!run_tile<W, kS, kS == mk::kPerGroup>(w, p, a, group, linear, t, healthy, sources)) return;
      if (!run_inline<W, kS>(w, p, a, healthy)) return;
    }
    if constexpr (kS == mk::kStatic) return;
    if (w.leader()) mk::count_finished(w, a, sources, static_workers<kS>(w));
  }
  while (true) {
    int64_t task = -1;
    if (w.leader() && healthy) {
      task = mk::pop_task(w, a, sources, static_workers<kS>(w),
                          [&](int64_t ticket) { return source_task<kS>(p, ticket); });
    }
    task = w.share(task);
    if (task < 0 || !run_queued<W, kS>(w, p, a, task, healthy, sources)) return;
  }
}

// Kernels mode: one ordinary launch per launch_at(k), in the static order.
template <class W>
EVT_HD inline void run_launch(W& w, const Params& p, const mk::LaunchArgs& a, int64_t k) {
  mk::zero_next_arena(w, a);
  int group;
  int64_t first, count;
  launch_at(p, k, group, first, count);
  bool healthy = true;
  for (int64_t linear = first + w.id(); linear < first + count; linear += w.count()) {
    if (!run_task<W, mk::kKernels>(w, p, a, group, linear, healthy)) return;
  }
}

// The loader warp's loop (its lane 0, CUDA only): the weight streams of the tasks this block's
// consumers run, in their order: this worker's positions of the static order, or under the
// dynamic schedules the tasks the leader announces, until it announces the end.
template <class W, mk::Schedule kS>
EVT_HD inline void run_loader(W& w, const Params& p, const mk::LaunchArgs& a) {
  if constexpr (kS == mk::kStatic) {
    const int64_t total = static_positions(p);
    for (int64_t position = w.id(); position < total; position += w.count()) {
      int group;
      int64_t linear;
      static_task(p, position, group, linear);
      if (!load_task<W, kS>(w, p, a, group, linear)) break;
    }
  } else {
    for (int64_t task = w.next_announced(); task != mk::kAnnounceStop; task = w.next_announced()) {
      int64_t t[4] = {};
      const int group = mk::task_id_group(task);
      unravel(p, group, mk::task_id_linear(task), t);
      if (!w.load(stream<W, kS>(w, p, a, group_ref(group), t), false)) break;
    }
  }
  w.finish_loading();
}

// Kernels mode: the loader of launch k, over the tiles run_launch gives this worker.
template <class W>
EVT_HD inline void run_launch_loader(W& w, const Params& p, const mk::LaunchArgs& a, int64_t k) {
  int group;
  int64_t first, count;
  launch_at(p, k, group, first, count);
  for (int64_t linear = first + w.id(); linear < first + count; linear += w.count()) {
    if (!load_task<W, mk::kKernels>(w, p, a, group, linear)) break;
  }
  w.finish_loading();
}

// The entry point host code is written against (runtime/megakernel/instance.h).
struct Megakernel {
  using ParamsType = Params;
  static constexpr int num_dims = kNumDims, num_buffers = kNumBuffers, num_events = kNumEvents;
  static constexpr int num_groups = kNumGroups;
  static constexpr bool dynamic_supported = kDynamicSupported;
  static constexpr bool has_streams = kHasStreams;
  static const char* group_name(int g) { return kGroupNames[g]; }
  static const char* event_name(int e) { return kEventNames[e]; }
  static const char* dim_name(int d) { return kDimNames[d]; }
  static const char* buffer_name(int b) { return kBufferNames[b]; }
  static int buffer_element_bytes(int b) { return kBufferElementBytes[b]; }
  static const char* graph_text() { return kGraphText; }
  static bool runtime_count(int e) { return kRuntimeCount[e]; }
  static bool early_pushable(int e) { return kEarlyPushable[e]; }
  static void shapes(Params& p) { set_shapes(p); }
  static void views(Params& p) { set_views(p); }
  static int64_t elements(const Params& p, int e) { return event_elements(p, e); }
  static int64_t tasks(const Params& p) { return total_tasks(p); }
  static int64_t target(const Params& p, int e) { return event_target(p, e); }
  static int64_t tiles(const Params& p, int g) { return group_tiles(p, g); }
  static bool range_triggered(int g) { return kRangeTriggered[g]; }
  // "final(3)": a task's name, for traces.
  static std::string task_name(const Params& p, int g, int64_t linear) {
    int64_t t[4] = {};
    unravel(p, g, linear, t);
    std::string s = std::string(kGroupNames[g]) + "(";
    for (int k = 0; k < tile_rank(g); ++k) s += (k ? ", " : "") + std::to_string(t[k]);
    return s + ")";
  }
  // The layer a task belongs to (its tile coordinate 0 in a layered group), or -1: traces group
  // tasks by stage and layer.
  static int64_t task_layer(const Params& p, int g, int64_t linear) {
    if (!kGroupLayered[g]) return -1;
    int64_t t[4] = {};
    unravel(p, g, linear, t);
    return t[0];
  }
  // The kernels mode's launches, in the static order: how many, and the tiles of launch k.
  static int64_t launches(const Params& p) { return launch_count(p); }
  static int64_t launch_tiles(const Params& p, int64_t k) {
    int group;
    int64_t first, count;
    launch_at(p, k, group, first, count);
    return count;
  }
  static bool dynamic_group(int g) { return group_dynamic(g); }
  // One instantiation per schedule, so each kernel holds only its own loop's code.
  template <class W, mk::Schedule kS>
  EVT_HD static void run(W& w, const Params& p, const mk::LaunchArgs& a) {
    run_megakernel<W, kS>(w, p, a);
    if constexpr (kHasStreams && (kS == mk::kDynamic || kS == mk::kPerGroup)) {
      if (w.leader()) w.announce(mk::kAnnounceStop);
    }
  }
  template <class W>
  EVT_HD static void run_one_launch(W& w, const Params& p, const mk::LaunchArgs& a, int64_t k) {
    run_launch(w, p, a, k);
  }
  // The loader warp of a block with weight streams (CudaWorker).
  template <class W, mk::Schedule kS>
  EVT_HD static void load(W& w, const Params& p, const mk::LaunchArgs& a) {
    run_loader<W, kS>(w, p, a);
  }
  template <class W>
  EVT_HD static void load_one_launch(W& w, const Params& p, const mk::LaunchArgs& a, int64_t k) {
    run_launch_loader(w, p, a, k);
  }
};)CODE");
  close(fmt::format("}}  // namespace evt::generated::{}", ns_));
}

Expected<std::string> Emitter::run() {
  EVT_RETURN_IF_ERROR(check_supported());
  // Events, releases and fires are emitted into a buffer first: whether dynamic scheduling is
  // possible is known only once every inverse was tried, and the prelude states it.
  const std::string saved = out_;
  out_.clear();
  indent_ = 1;
  emit_shapes();
  emit_views();
  emit_group_geometry();
  emit_releases();
  EVT_RETURN_IF_ERROR(emit_fires());
  emit_events();
  emit_groups();
  emit_dispatch_and_loops();
  const std::string body = out_;
  out_ = saved;
  indent_ = 0;
  emit_prelude();
  return out_ + body;
}

}  // namespace

Expected<std::string> generate_megakernel(const ir::Graph& g, const kernels::Registry& registry,
                                          const CodegenOptions& options) {
  return Emitter(g, registry, options.ns).run();
}

}  // namespace evt::compiler
