#pragma once
// Tile bodies of the scheduling benchmarks (bench/graphs): an empty tile, to measure the
// scheduler alone, and a chain step with a few bytes of real data flow.

#include "kernels/tile_body.h"

namespace evt::kernels {

template <class Block>
EVT_HD void empty_body(const Block&, const int64_t*, const DevBuffer*, const DevBuffer*) {}

// reads (in: T), writes (out: T): out[t] = in[t] + in[(t + 1) % T]. Needs the whole previous
// step only through the event it waits on (wait_count = T).
template <class Block>
EVT_HD void chain_step_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  if (b.thread() != 0) return;
  const int64_t n = reads[0].dim(0), t = tile[0];
  writes[0].as<float>()[t] = reads[0].as<const float>()[t] + reads[0].as<const float>()[(t + 1) % n];
}

}  // namespace evt::kernels
