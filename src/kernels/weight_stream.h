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
// The tiles come from a row panel of a matrix, stored k-block-major (kernels/llm/weight_tiles.h):
// tile (g, kb) at base + (kb * stride + g) * kStreamTileBytes, base the panel's start. A task
// reads groups [g0, g0 + groups) over k-blocks [kb0, kb0 + kblocks), k-block by k-block,
// `passes` times over (once per pass of tokens, gemv.h).
//
// A task of several rounds (the LM head's: gemv.h) reads `rounds` whole panels one after another
// in each pass, every k-block of each: panels lie end to end, so round r + 1 starts where round r
// ends. Every round has `groups` groups but the last, which has `last_groups` (the matrix's last
// panel may be narrower). A chunk never spans two rounds or two passes.

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace evt::kernels {

inline constexpr int64_t kStreamTileBytes = 1024;
// 32 KiB chunks: one block per SM streams 1.5 MiB at 4.37 TB/s over the grid in 32 KiB chunks
// against 3.97 in 16 KiB ones (bench/micro/stream_micro.cu), as each chunk costs the consumers a
// wait and a release. On an H200 the step followed (8B at B = 1 -5.6%, 0.6B -3.3%;
// bench/results/chunk_32k_ab_h200.json).
inline constexpr int64_t kChunkTiles = 32;
inline constexpr int64_t kChunkBytes = kChunkTiles * kStreamTileBytes;

struct WeightStream {
  const unsigned char* base = nullptr;
  int64_t stride = 0;  // tiles from one k-block of a group to the next: the matrix's groups
  int64_t g0 = 0, groups = 0;
  int64_t kb0 = 0, kblocks = 0;
  int64_t passes = 0;
  int64_t rounds = 1, last_groups = 0;  // last_groups: with rounds > 1 only

  EVT_HD int64_t round_groups(int64_t r) const { return rounds > 1 && r == rounds - 1 ? last_groups : groups; }
  EVT_HD int64_t chunks() const {
    if (base == nullptr) return 0;
    int64_t per_pass = 0;
    for (int64_t r = 0; r < rounds; ++r) per_pass += (round_groups(r) * kblocks + kChunkTiles - 1) / kChunkTiles;
    return passes * per_pass;
  }
};

// Walks a stream's chunks in order, with no division on the way (the loader issues a chunk every
// few hundred nanoseconds): next() hands out each contiguous piece of the next chunk. The tiles of
// one k-block are side by side in memory, so a chunk is at most one piece per k-block it meets,
// and a single piece when the task reads whole k-blocks (groups == stride: a panel of the layout).
class StreamCursor {
 public:
  EVT_HD explicit StreamCursor(const WeightStream& s)
      : kblock_(s.base + (s.kb0 * s.stride + s.g0) * kStreamTileBytes),
        pass_start_(kblock_),
        kblock_bytes_(s.stride * kStreamTileBytes),
        groups_(static_cast<uint32_t>(s.groups)),
        first_groups_(groups_),
        last_groups_(static_cast<uint32_t>(s.round_groups(s.rounds - 1))),
        kblocks_(static_cast<uint32_t>(s.kblocks)),
        left_(s.base == nullptr ? 0 : groups_ * kblocks_),
        rounds_left_(static_cast<uint32_t>(s.rounds - 1)),
        rounds_(static_cast<uint32_t>(s.rounds)),
        passes_left_(s.base == nullptr || s.passes == 0 ? 0 : static_cast<uint32_t>(s.passes - 1)) {}

  EVT_HD bool done() const { return left_ == 0; }
  // Bytes of the next chunk: its tiles, never past the end of a pass.
  EVT_HD uint32_t chunk_bytes() const {
    return static_cast<uint32_t>((left_ < kChunkTiles ? left_ : kChunkTiles) * kStreamTileBytes);
  }
  // Calls run(src, bytes, dst_offset) for each piece of the next chunk and moves past it. `run` is
  // host-only on the host's path (CopyingStreamReader): the pragma keeps nvcc from warning that a
  // host-device function calls it, once per instantiation (the device code is the same).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class Run>
  EVT_HD void next(Run&& run) {
    uint32_t todo = left_ < kChunkTiles ? left_ : static_cast<uint32_t>(kChunkTiles), at = 0;
    left_ -= todo;
    if (kblock_bytes_ == int64_t{groups_} * kStreamTileBytes) {
      // The round's k-blocks lie end to end (the task reads whole k-blocks of a panel): the chunk is
      // one piece, and kblock_ walks tile by tile with g_ left at 0. The loop below would take one
      // turn per k-block to find the same, on the loader's one thread, between a stage's release
      // and its refill.
      const uint32_t bytes = todo * static_cast<uint32_t>(kStreamTileBytes);
      run(kblock_, bytes, 0u);
      kblock_ += bytes;
      end_of_chunk();
      return;
    }
    const unsigned char* piece = nullptr;  // the piece being gathered: [piece, +bytes) to dst `from`
    uint32_t bytes = 0, from = 0;
    while (todo > 0) {
      const uint32_t n = todo < groups_ - g_ ? todo : groups_ - g_;
      const unsigned char* src = kblock_ + g_ * kStreamTileBytes;
      if (src != piece + bytes) {
        if (bytes > 0) run(piece, bytes, from);
        piece = src;
        bytes = 0;
        from = at;
      }
      bytes += n * static_cast<uint32_t>(kStreamTileBytes);
      at += n * static_cast<uint32_t>(kStreamTileBytes);
      todo -= n;
      g_ += n;
      if (g_ == groups_) {
        g_ = 0;
        kblock_ += kblock_bytes_;
      }
    }
    run(piece, bytes, from);
    end_of_chunk();
  }

 private:
  // After a chunk: at the end of a round, on to the next round or pass.
  EVT_HD void end_of_chunk() {
    if (left_ > 0) return;
    if (rounds_left_ > 0) {  // the next panel, which starts where this one ended
      --rounds_left_;
      start_round(rounds_left_ == 0 ? last_groups_ : first_groups_);
    } else if (passes_left_ > 0) {  // the next pass reads the same tiles again
      --passes_left_;
      rounds_left_ = rounds_ - 1;
      kblock_ = pass_start_;
      start_round(rounds_left_ == 0 ? last_groups_ : first_groups_);
    }
  }
  // A round of `groups` groups from kblock_ on; a round of whole panels (rounds > 1) has as many
  // tiles in a k-block as groups.
  EVT_HD void start_round(uint32_t groups) {
    groups_ = groups;
    if (rounds_ > 1) kblock_bytes_ = int64_t{groups} * kStreamTileBytes;
    left_ = groups * kblocks_;
    g_ = 0;
  }

  const unsigned char* kblock_;  // group g0 of the k-block being read
  const unsigned char* pass_start_;
  int64_t kblock_bytes_;
  uint32_t groups_, first_groups_, last_groups_, kblocks_, g_ = 0, left_, rounds_left_, rounds_, passes_left_;
};

// A body's view of its stream: acquire() returns the next chunk's tiles once they are in memory,
// release() hands the chunk back. Chunks come in order; every chunk is acquired and released once.
// On the GPU the loader warp fills a ring (runtime/megakernel/weight_ring.cuh); on the host,
// whose blocks have no loader, this reader copies each chunk into a buffer as it is acquired, so
// the CPU backends read the tiles exactly where the GPU's bodies find them.
class CopyingStreamReader {
 public:
  CopyingStreamReader(const WeightStream& s, unsigned char* buffer) : cursor_(s), buffer_(buffer) {}
  const unsigned char* acquire() {
    cursor_.next([&](const unsigned char* src, uint32_t bytes, uint32_t at) { std::memcpy(buffer_ + at, src, bytes); });
    return buffer_;
  }
  void release() {}

 private:
  StreamCursor cursor_;
  unsigned char* buffer_;
};

}  // namespace evt::kernels
