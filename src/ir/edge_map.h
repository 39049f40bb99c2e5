#pragma once
// Edge maps: how task coordinates relate to event coordinates, written einsum-like (seed 001).
//
//   "ij->i"                    task (i, j) touches E[i]                      (affine)
//   "i->(i, :)"                task (i) touches the whole row E[i, :]        (slice)
//   "i->topk[i, :]"            task (i) touches E[topk[i, k]] for every k    (data-dependent)
//   "t->tile_expert[t]"        task (t) touches E[tile_expert[t]]            (data-dependent)
//   "e->[indptr[e], indptr[e+1])"
//                              range trigger (in-edges only): event element e releases the
//                              consumer tasks whose linear index lies in [indptr[e], indptr[e+1])
//
// A negative value read from an index buffer means "no event" (padding in routed tiles).

#include <string>
#include <vector>

#include "ir/expr.h"

namespace evt::ir {

// One component of the target coordinate.
struct Coord {
  enum class Kind { kScalar, kSlice, kGather };
  Kind kind = Kind::kScalar;
  Expr expr;                        // kScalar: the coordinate (may contain loads)
  std::string buffer;               // kGather: buffer[index...] with ':' where index is null
  std::vector<Expr> index;

  static Coord scalar(Expr e) { return Coord{Kind::kScalar, std::move(e), {}, {}}; }
  static Coord slice() { return Coord{Kind::kSlice, {}, {}, {}}; }
  static Coord gather(std::string buffer, std::vector<Expr> index) {
    return Coord{Kind::kGather, {}, std::move(buffer), std::move(index)};
  }
  friend bool operator==(const Coord&, const Coord&) = default;
};

struct EdgeMap {
  enum class Kind { kMap, kRangeTrigger };
  Kind kind = Kind::kMap;
  // kMap: task variables. kRangeTrigger: event variables.
  std::vector<std::string> vars;
  std::vector<Coord> coords;        // kMap: one per event dimension
  Expr range_begin, range_end;      // kRangeTrigger: consumer task range, half-open

  // Reads no index buffer: the map is known from the binding alone.
  bool is_data_independent() const;
  // Every coordinate is affine in the task variables (slices allowed), with no loads.
  bool is_affine() const;
  // Index buffers the map reads.
  std::vector<std::string> index_buffers() const;

  // Edge text as it appears in graph files, e.g. `ij->i` (without quotes).
  std::string str() const;
  friend bool operator==(const EdgeMap&, const EdgeMap&) = default;
};

}  // namespace evt::ir
