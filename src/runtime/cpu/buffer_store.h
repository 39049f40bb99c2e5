#pragma once
// Host memory for every buffer of an instantiated graph, as the CPU executor reads and writes it.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/tile_graph.h"
#include "kernels/tile_args.h"
#include "util/status.h"

namespace evt::runtime::cpu {

class BufferStore {
 public:
  explicit BufferStore(const ir::TileGraph& tg);
  BufferStore(const BufferStore&) = delete;  // data_ points into storage_
  BufferStore& operator=(const BufferStore&) = delete;

  // Makes `buffer` use caller-owned memory from now on (state that outlives one instance, such
  // as a KV cache, or data mapped elsewhere). Fails unless `memory` holds the buffer exactly.
  Status bind_external(int buffer, std::span<std::byte> memory);

  kernels::BufferView view(int buffer) const;
  std::span<const std::byte> bytes(int buffer) const;
  std::span<std::byte> mutable_bytes(int buffer);

  // Buffers no task group writes are the graph's inputs.
  bool is_input(int buffer) const { return !written_[buffer]; }
  // Inputs get seeded random values: floats uniform in [-1, 1), integers uniform in [0, 8).
  void fill_inputs(uint64_t seed);
  // Written buffers get a poison pattern (NaN for floats, 0x7f7f7f7f for integers), so that an
  // element no task wrote shows up in comparisons instead of passing as zero.
  void poison_outputs();

  // Reads an element of an integer index buffer, for data-dependent edge maps.
  Expected<int64_t> load_index(const std::string& buffer, std::span<const int64_t> index) const;

  // Compares every written buffer byte for byte; the error names the buffer and the first
  // differing element.
  Status compare_outputs(const BufferStore& expected) const;

 private:
  const ir::TileGraph* tg_;
  std::vector<std::vector<uint64_t>> storage_;  // 8-byte aligned
  std::vector<void*> data_;                     // storage_ or the memory bound by bind_external
  std::vector<int64_t> numel_;
  std::vector<bool> written_;
};

}  // namespace evt::runtime::cpu
