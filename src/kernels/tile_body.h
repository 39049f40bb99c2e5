#pragma once
// Tile bodies: the code a tile runs inside the megakernel, written once for a block of threads
// and compiled both by nvcc (a CUDA block) and by the host compiler (a block of one thread, as
// the CPU backend and the CPU executor run it). A body is a function template over `Block`:
//
//   template <class Block>
//   EVT_HD void body(const Block& b, const int64_t* tile, const DevBuffer* reads, const DevBuffer* writes);
//
// Block provides thread() and threads() (this thread's index and the block size), sync() (a
// block barrier), scratch() (kernels/block_scratch.h), weights(stream) (a reader of the task's
// weight stream, kernels/weight_stream.h), and set_wait_count(set_index, element, count) for
// groups with `sets`. It may declare `static constexpr int kPassSets`: how many sets of 16 tokens
// a projection's pass takes at most (kernels/llm/gemv.h; 1 when it does not).

#include <cstdint>

#include "kernels/block_scratch.h"
#include "kernels/hd.h"
#include "kernels/tile_args.h"
#include "kernels/weight_stream.h"

namespace evt::kernels {

// A buffer as device code sees it: a plain struct that can be a kernel argument.
struct DevBuffer {
  static constexpr int kMaxRank = 4;
  void* data = nullptr;
  int64_t shape[kMaxRank] = {};
  int rank = 0;
  int64_t numel = 0;

  template <typename T>
  EVT_HD T* as() const {
    return static_cast<T*>(data);
  }
  EVT_HD int64_t dim(int k) const { return shape[k]; }
};

// acc + a * b rounded twice, as the host computes it: nvcc would otherwise fuse it into one FMA
// and the GPU's bits would differ from the CPU reference's. For bodies that must match exactly.
EVT_HD inline float add_product(float acc, float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(acc, __fmul_rn(a, b));
#else
  return acc + a * b;
#endif
}

// The block of the CPU executor: one thread, setting run-time counts through TileArgs.
class SerialBlock {
 public:
  explicit SerialBlock(WaitCountSetter* setter) : setter_(setter) {}
  int thread() const { return 0; }
  int threads() const { return 1; }
  void sync() const {}
  Scratch scratch() const { return host_scratch(); }
  CopyingStreamReader weights(const WeightStream& s) const { return CopyingStreamReader(s, host_chunk_buffer()); }
  void set_wait_count(int set_index, int64_t element, int64_t count) const {
    setter_->set_wait_count(static_cast<size_t>(set_index), element, count);
  }

 private:
  WaitCountSetter* setter_;
};

// Adapts a tile body to the CPU executor's TileArgs: the CPU row of a function that has only a
// body. Buffers above kMaxRank dimensions are not supported by bodies.
template <void (*Body)(const SerialBlock&, const int64_t*, const DevBuffer*, const DevBuffer*), int kReads, int kWrites>
void run_body_on_cpu(const TileArgs& args) {
  DevBuffer reads[kReads > 0 ? kReads : 1], writes[kWrites > 0 ? kWrites : 1];
  auto convert = [](const BufferView& v, DevBuffer& d) {
    d.data = v.data;
    d.rank = static_cast<int>(v.shape.size());
    d.numel = v.numel;
    for (int k = 0; k < d.rank && k < DevBuffer::kMaxRank; ++k) d.shape[k] = v.shape[k];
  };
  for (int i = 0; i < kReads; ++i) convert(args.reads[i], reads[i]);
  for (int i = 0; i < kWrites; ++i) convert(args.writes[i], writes[i]);
  Body(SerialBlock(args.wait_counts), args.tile.data(), reads, writes);
}

}  // namespace evt::kernels
