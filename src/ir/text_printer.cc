// Printer of the graph text form (text_form.h): one canonical layout, so that printing a parsed
// graph and parsing it again reaches a fixed point.

#include <string>
#include <vector>

#include "ir/text_form.h"

namespace evt::ir {

namespace {

constexpr size_t kMaxLineWidth = 100;

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s;
}

// A one-element tuple keeps its trailing comma, as in Python: `(B,)`.
std::string tuple(const std::vector<std::string>& items) {
  return "(" + join(items) + (items.size() == 1 ? ",)" : ")");
}

std::string expr_tuple(const std::vector<Expr>& exprs) {
  std::vector<std::string> items;
  for (const Expr& e : exprs) items.push_back(e.str());
  return tuple(items);
}

std::string edge_dict(const std::vector<Edge>& edges) {
  std::vector<std::string> items;
  for (const Edge& e : edges) items.push_back(e.event + ": \"" + e.map.str() + "\"");
  return "{" + join(items) + "}";
}

std::string buffer_line(const Buffer& b) {
  return b.name + " = buffer(" + expr_tuple(b.shape) + ", " + dtype_name(b.dtype) + ")";
}

std::string event_line(const Event& e) {
  std::string s = e.name + " = event(" + expr_tuple(e.shape);
  // The text form cannot say "inferred, and found to be N": a count the inference pass filled
  // in prints as `wait_count=N` and so reads back as kExplicit, which the verifier then checks.
  // The count of a kRuntime event is not printed; nothing can know it before run time.
  if (e.wait.kind == WaitCount::Kind::kRuntime) {
    s += ", wait_count=runtime";
  } else if (e.wait.count.defined()) {
    s += ", wait_count=" + e.wait.count.str();
  }
  return s + ")";
}

// `head` followed by the arguments, broken before a keyword argument that would run past
// kMaxLineWidth; continuation lines line up under the first argument.
std::string wrapped_call(const std::string& head, const std::vector<std::string>& args) {
  const std::string indent(head.size(), ' ');
  std::string out = head;
  size_t width = head.size();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string piece = args[i] + (i + 1 < args.size() ? "," : ")");
    // args[0] is the tile function and args[1] the first keyword argument: never broken apart.
    if (i >= 2 && width + 1 + piece.size() > kMaxLineWidth) {
      out += "\n" + indent;
      width = indent.size();
    } else if (i > 0) {
      out += " ";
      ++width;
    }
    out += piece;
    width += piece.size();
  }
  return out;
}

// Keyword arguments in a fixed order, empty ones left out (tiles= is required).
std::string group_line(const TaskGroup& g) {
  std::vector<std::string> args = {g.function, "tiles=" + expr_tuple(g.tiles)};
  if (!g.reads.empty()) args.push_back("reads=" + tuple(g.reads));
  if (!g.writes.empty()) args.push_back("writes=" + tuple(g.writes));
  if (!g.in_edges.empty()) args.push_back("in_edges=" + edge_dict(g.in_edges));
  if (!g.out_edges.empty()) args.push_back("out_edges=" + edge_dict(g.out_edges));
  if (!g.sets.empty()) args.push_back("sets=" + tuple(g.sets));
  if (g.schedule == GroupSchedule::kDynamic) args.push_back("schedule=dynamic");
  if (g.schedule == GroupSchedule::kInline) args.push_back("schedule=inline");
  if (g.layered) args.push_back("layered=true");
  return wrapped_call(g.name + " = call_device(", args);
}

}  // namespace

// Declarations come grouped by kind (dims, buffers, events, task groups), which is always a
// declare-before-use order, whatever order the source had.
std::string print_graph(const Graph& g) {
  std::vector<std::string> lines;
  for (const std::string& d : g.dims) lines.push_back(d + " = dim()");
  for (const Buffer& b : g.buffers) lines.push_back(buffer_line(b));
  for (const Event& e : g.events) lines.push_back(event_line(e));
  for (const TaskGroup& t : g.groups) lines.push_back(group_line(t));
  std::string out;
  if (!g.name.empty()) out += "graph " + g.name + (lines.empty() ? "\n" : "\n\n");
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

}  // namespace evt::ir
