#pragma once
// The tile of the random-graph tests (tests/support/random_graph.h): every task hashes its id with
// the values of the tasks it depends on, so a wrong result or an early start anywhere in a
// schedule changes the output. A dependency still holding the poison pattern when read (its
// producer had not run yet) turns the task's value into kMixEarly.
//
// The dependency table has the task's tile grid as its leading dims and one row per task:
// row[0] is the task's id (its index in `vals`), row[1..] the ids of the tasks it depends on,
// -1 where unused. The table's shape thus gives the tile's linear index, so one body serves
// grids of any rank.

#include "kernels/tile_body.h"

namespace evt::kernels {

inline constexpr int64_t kMixPoison = 0x7f7f7f7f7f7f7f7f;  // BufferStore's poison of i64 outputs
inline constexpr int64_t kMixEarly = -1;

EVT_HD constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// reads (deps: grid... x (1 + D) i64), writes (vals: one i64 per task of the graph). Ids outside
// `vals` are skipped, so inputs that are not a dependency table (eventide graph run fills
// inputs at random) cannot write out of bounds.
template <class Block>
EVT_HD void mix_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  if (b.thread() != 0) return;
  const DevBuffer &deps = reads[0], &vals = writes[0];
  const int rank = deps.rank - 1;
  const int64_t width = deps.dim(rank);
  int64_t linear = 0;
  for (int k = 0; k < rank; ++k) linear = linear * deps.dim(k) + tile[k];
  const int64_t* row = deps.as<const int64_t>() + linear * width;
  int64_t* v = vals.as<int64_t>();
  const int64_t id = row[0];
  if (id < 0 || id >= vals.numel) return;
  uint64_t acc = splitmix64(static_cast<uint64_t>(id));
  bool early = false;
  for (int64_t k = 1; k < width; ++k) {
    const int64_t d = row[k];
    if (d < 0 || d >= vals.numel) continue;
    early = early || v[d] == kMixPoison;
    acc = acc * 31 + static_cast<uint64_t>(v[d]);
  }
  v[id] = early ? kMixEarly : static_cast<int64_t>(acc & 0x3fffffffffffffffull);
}

}  // namespace evt::kernels
