#pragma once
// The text form of a graph (`examples/*.evt`), following the seeds' spelling:
//
//   graph splitk
//   B = dim()
//   A = buffer((B*32, 128), f32)
//   E = event((B,), wait_count=4)
//   partial = call_device(partial_sum, tiles=(B, 4), reads=(A,), writes=(P,), out_edges={E: "ij->i"})
//
// print_graph and parse_graph round-trip: parse_graph(print_graph(g)) == g.
// Errors carry "file:line:column: message", then the offending line with a caret under the column,
// also for errors inside an edge-map string.

#include <string>
#include <string_view>

#include "ir/edge_map.h"
#include "ir/expr.h"
#include "ir/graph.h"
#include "util/status.h"

namespace evt::ir {

Expected<Graph> parse_graph(std::string_view text, std::string_view filename = "<input>");
Expected<Graph> load_graph_file(const std::string& path);
std::string print_graph(const Graph& g);

// Stand-alone forms, used by tests and by code that builds graphs programmatically. Errors name
// the column within `text`.
Expected<Expr> parse_expr(std::string_view text);
Expected<EdgeMap> parse_edge_map(std::string_view text);

}  // namespace evt::ir
