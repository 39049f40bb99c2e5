#include "ir/edge_map.h"

#include <algorithm>
#include <set>

namespace evt::ir {

namespace {

void collect_coord_loads(const Coord& c, std::set<std::string>& out) {
  switch (c.kind) {
    case Coord::Kind::kScalar: collect_loads(c.expr, out); break;
    case Coord::Kind::kSlice: break;
    case Coord::Kind::kGather:
      out.insert(c.buffer);
      for (const Expr& i : c.index) {
        if (i.defined()) collect_loads(i, out);
      }
      break;
  }
}

std::string coord_str(const Coord& c) {
  switch (c.kind) {
    case Coord::Kind::kScalar: return c.expr.str();
    case Coord::Kind::kSlice: return ":";
    case Coord::Kind::kGather: {
      std::string s = c.buffer + "[";
      for (size_t i = 0; i < c.index.size(); ++i) {
        if (i) s += ", ";
        s += c.index[i].defined() ? c.index[i].str() : ":";
      }
      return s + "]";
    }
  }
  return "";
}

}  // namespace

std::vector<std::string> EdgeMap::index_buffers() const {
  std::set<std::string> out;
  for (const Coord& c : coords) collect_coord_loads(c, out);
  if (kind == Kind::kRangeTrigger) {
    collect_loads(range_begin, out);
    collect_loads(range_end, out);
  }
  return {out.begin(), out.end()};
}

bool EdgeMap::is_data_independent() const { return index_buffers().empty(); }

bool EdgeMap::is_affine() const {
  if (kind != Kind::kMap) return false;
  const std::set<std::string> v(vars.begin(), vars.end());
  return std::all_of(coords.begin(), coords.end(), [&](const Coord& c) {
    return c.kind == Coord::Kind::kSlice || (c.kind == Coord::Kind::kScalar && is_affine_in(c.expr, v));
  });
}

std::string EdgeMap::str() const {
  const bool letters = std::all_of(vars.begin(), vars.end(), [](const std::string& v) { return v.size() == 1; });
  std::string s;
  if (letters && !vars.empty()) {
    for (const auto& v : vars) s += v;
  } else {
    s += "(";
    for (size_t i = 0; i < vars.size(); ++i) s += (i ? ", " : "") + vars[i];
    s += ")";
  }
  s += "->";
  if (kind == Kind::kRangeTrigger) return s + "[" + range_begin.str() + ", " + range_end.str() + ")";
  if (coords.size() == 1) return s + coord_str(coords[0]);
  s += "(";
  for (size_t i = 0; i < coords.size(); ++i) s += (i ? ", " : "") + coord_str(coords[i]);
  return s + ")";
}

}  // namespace evt::ir
