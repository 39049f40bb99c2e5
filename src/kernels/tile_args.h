#pragma once
// What a tile function sees: its tile coordinates and raw views of the buffers it reads and
// writes. Tile functions know nothing of graphs, events or schedulers.

#include <cstdint>
#include <span>

namespace evt::kernels {

struct BufferView {
  void* data = nullptr;
  std::span<const int64_t> shape;
  int64_t numel = 0;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  int64_t dim(size_t k) const { return shape[k]; }
};

// Lets a task set the run-time wait counts of the events its group lists in `sets`.
class WaitCountSetter {
 public:
  virtual ~WaitCountSetter() = default;
  // `set_index` indexes the group's `sets`; `element` is row-major within that event.
  virtual void set_wait_count(size_t set_index, int64_t element, int64_t count) = 0;
};

struct TileArgs {
  std::span<const int64_t> tile;
  std::span<const BufferView> reads;
  std::span<const BufferView> writes;
  WaitCountSetter* wait_counts = nullptr;  // non-null only for groups with `sets`
};

}  // namespace evt::kernels
