#pragma once
// A family of random DAG-shaped Event Tensor graphs whose every task runs `mix`
// (kernels/examples/mix_hash.h): the property tests draw them through rapidcheck, and
// evt_gen_random_graph writes some from fixed seeds at build time for the megakernel tests.
//
// Every extent is affine in the dims B and W, so a graph is valid for every binding >= 1: task
// groups of rank 1 or 2, one event per edge, out-edges of several kinds (one-to-one, reductions,
// halving, constant, rotation, broadcast, and a data-dependent permutation) and in-edges that
// await one element, a slice, or the matching coordinates.

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tile_graph.h"
#include "runtime/cpu/buffer_store.h"

namespace rc {
template <typename T>
class Gen;
}  // namespace rc

namespace evt::testing {

// A binding of the family's two dims.
struct Dims {
  int64_t b, w;
  ir::Binding binding() const { return {{"B", b}, {"W", w}}; }
};

// b * B + w * W + c.
struct Size {
  int64_t b = 0, w = 0, c = 0;
  ir::Expr expr() const;
  int64_t value(const Dims& d) const { return b * d.b + w * d.w + c; }
  bool is_const() const { return b == 0 && w == 0; }
  friend Size operator+(Size x, Size y) { return {x.b + y.b, x.w + y.w, x.c + y.c}; }
  // One factor must be constant: the family keeps every extent affine.
  friend Size operator*(Size x, Size y);
  friend bool operator==(const Size&, const Size&) = default;
};

enum class ProducerMap {
  kIdentity,   // "i->i", "ij->(i, j)"
  kProject,    // "ij->i" (rank 2)
  kHalve,      // "i->i//2" (an even extent)
  kConst,      // "i->0"
  kRotate,     // "i->(i+1)%N", "ij->(i, (j+1)%N)": a shift that wraps, so counts stay uniform
  kBroadcast,  // "i->(i, :)": a task notifies a whole row
  kPermute,    // "i->perm[i]" (rank 1): data-dependent, perm filled with a permutation at run time
};
enum class ConsumerMap {
  kFirst,  // element 0 of every dim
  kSlice,  // the whole event
  kMod,    // coordinate k = tile coordinate k % extent: no inverse, so never under dynamic scheduling
  kMatch,  // per dim: the tile coordinate where extents agree, its half where the tile's is twice, else ':'
};

struct GroupSpec {
  std::vector<Size> grid;
  bool dynamic = false;  // schedule=dynamic
};

struct EdgeSpec {
  int producer, consumer;
  ProducerMap pmap;
  ConsumerMap cmap;
  bool explicit_count;
};

struct Spec {
  std::vector<GroupSpec> groups;
  std::vector<EdgeSpec> edges;

  Size tasks(int g) const;
  std::vector<Size> event_shape(const EdgeSpec& e) const;
  Size notifications_per_element(const EdgeSpec& e) const;
};

struct FamilyOptions {
  int min_groups = 1, max_groups = 6;
  // No kMod in-edges: every graph then has a dynamic schedule, which the megakernel tests run.
  bool invertible_in_edges = false;
};

rc::Gen<Spec> gen_spec(const FamilyOptions& options = {});
// The spec drawn from `seed`, for build-time generation.
Spec spec_from_seed(uint64_t seed, const FamilyOptions& options);

// The build-time graphs (evt_gen_random_graph; tests/CMakeLists.txt lists the seeds): at least
// four groups, for some depth; in-edges with inverses, so that every schedule is offered.
inline constexpr FamilyOptions kBuildTimeFamily{.min_groups = 4, .max_groups = 7, .invertible_in_edges = true};
// The graph of seed `seed`, named random<seed> as its megakernel is. Tests rebuild it here rather
// than read the file, so a build carried to another machine needs no path.
ir::Graph build_time_graph(uint64_t seed);
// The bindings the megakernel tests run each build-time graph for, in this order.
std::vector<ir::Binding> build_time_bindings();

// Buffers: vals (one value per task), deps<g> (group g's dependency table: its tile grid, then
// one row of 1 + the most dependencies a task can have), perm<e> (edge e's permutation).
ir::Graph build_graph(const Spec& s, const std::string& name);

// Per task id (group-major, as TileGraph numbers them): the sorted ids of the tasks it depends
// on. The oracle derives them from the map kinds alone, without the IR; permutations reverse.
std::vector<std::vector<int64_t>> oracle_deps(const Spec& s, const Dims& d);

// True when the graph's tasks run `mix`, whose inputs fill_mix_inputs writes.
bool runs_mix(const ir::Graph& g);
// Writes the inputs of a graph of `mix` tasks: every perm buffer reversed, then every dependency
// table from the instantiated graph, data-dependent out-edges resolved through those
// permutations. Returns the dependencies it wrote.
std::vector<std::vector<int64_t>> fill_mix_inputs(const ir::TileGraph& tg, runtime::cpu::BufferStore& store);

}  // namespace evt::testing
