#pragma once
// An example of the prefetch prologue: out[t, :] = w[t, :] + x[t, :]. The weight row w[t] does
// not depend on any event, so the prologue stages it (into `stage`, standing in for shared
// memory) before the task waits for x; the body then adds the event-dependent x.

#include "kernels/tile_body.h"

namespace evt::kernels {

// reads (w: T x H, x: T x H), writes (out: T x H, stage: T x H).
template <class Block>
EVT_HD void staged_add_prologue(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t h = reads[0].dim(1), t = tile[0];
  for (int64_t c = b.thread(); c < h; c += b.threads()) {
    writes[1].as<float>()[t * h + c] = reads[0].as<const float>()[t * h + c];
  }
}

template <class Block>
EVT_HD void staged_add_body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  const int64_t h = reads[0].dim(1), t = tile[0];
  for (int64_t c = b.thread(); c < h; c += b.threads()) {
    writes[0].as<float>()[t * h + c] = writes[1].as<const float>()[t * h + c] + reads[1].as<const float>()[t * h + c];
  }
}

// The CPU reference: the same result, without staging (the stage is written too, so outputs match).
template <class Block>
EVT_HD void staged_add_reference(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes) {
  staged_add_prologue(b, tile, reads, writes);
  staged_add_body(b, tile, reads, writes);
}

}  // namespace evt::kernels
