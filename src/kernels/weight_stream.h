#pragma once
// A task's weight stream: the weight tiles its body reads, in the order it reads them, cut into
// chunks of kChunkTiles tiles.
//
// Weights depend on no event, so they can be read before a task's inputs are ready. A tile
// function that declares a stream (the registry row's `device_stream`) lets the megakernel's
// loader warp copy its chunks into a shared-memory ring ahead of time, across the task's
// dependency wait and the tasks before it on the same SM, while the body consumes them in order
// (seed 001's weight prefetch, taken as far as the ring reaches). The body sees each chunk as
// kChunkTiles whole tiles side by side, wherever they came from.
//
// The tiles come from a matrix stored k-block-major (kernels/llm/weight_tiles.h): tile (g, kb) at
// base + (kb * stride + g) * kStreamTileBytes. A task reads groups [g0, g0 + groups) over
// k-blocks [kb0, kb0 + kblocks), k-block by k-block, `passes` times over (once per pass of
// tokens, gemv.h). A chunk never spans two passes.

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace evt::kernels {

inline constexpr int64_t kStreamTileBytes = 1024;
inline constexpr int64_t kChunkTiles = 16;
inline constexpr int64_t kChunkBytes = kChunkTiles * kStreamTileBytes;

struct WeightStream {
  const unsigned char* base = nullptr;
  int64_t stride = 0;  // tiles from one k-block of a group to the next: the matrix's groups
  int64_t g0 = 0, groups = 0;
  int64_t kb0 = 0, kblocks = 0;
  int64_t passes = 0;

  EVT_HD int64_t tiles_per_pass() const { return groups * kblocks; }
  EVT_HD int64_t chunks_per_pass() const { return (tiles_per_pass() + kChunkTiles - 1) / kChunkTiles; }
  EVT_HD int64_t chunks() const { return base == nullptr ? 0 : passes * chunks_per_pass(); }
  // Tiles of chunk c (the last chunk of a pass may be short).
  EVT_HD int64_t chunk_tiles(int64_t c) const {
    const int64_t first = c % chunks_per_pass() * kChunkTiles;
    return min_of<int64_t>(kChunkTiles, tiles_per_pass() - first);
  }
  // Calls run(src, bytes, dst_offset) for each contiguous piece of chunk c, in order: the tiles of
  // one k-block are side by side in memory, so a chunk is at most one piece per k-block it meets.
  template <class Run>
  EVT_HD void for_each_run(int64_t c, Run&& run) const {
    const int64_t first = c % chunks_per_pass() * kChunkTiles, end = first + chunk_tiles(c);
    for (int64_t i = first; i < end;) {
      const int64_t kb = i / groups, g = i % groups;
      const int64_t n = min_of<int64_t>(end - i, groups - g);
      run(base + ((kb0 + kb) * stride + g0 + g) * kStreamTileBytes, n * kStreamTileBytes, (i - first) * kStreamTileBytes);
      i += n;
    }
  }
};

// A body's view of its stream: acquire() returns the next chunk's tiles once they are in memory,
// release() hands the chunk back. Chunks come in order; every chunk is acquired and released once.
// On the GPU the loader warp fills a ring (runtime/megakernel/weight_ring.cuh); on the host,
// whose blocks have no loader, this reader copies each chunk into a buffer as it is acquired, so
// the CPU backends read the tiles exactly where the GPU's bodies find them.
class CopyingStreamReader {
 public:
  CopyingStreamReader(const WeightStream& s, unsigned char* buffer) : s_(s), buffer_(buffer) {}
  const unsigned char* acquire() {
    s_.for_each_run(next_, [&](const unsigned char* src, int64_t bytes, int64_t at) {
      std::memcpy(buffer_ + at, src, static_cast<size_t>(bytes));
    });
    return buffer_;
  }
  void release() { ++next_; }

 private:
  WeightStream s_;
  unsigned char* buffer_;
  int64_t next_ = 0;
};

}  // namespace evt::kernels
