#pragma once
// The KV cache's page pool: which pages are free. A sequence holds a list of pages (its row of
// the block table) and grows it one page at a time; pages go back when it finishes.

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace evt::model {

class KvPages {
 public:
  explicit KvPages(int64_t pages);

  // Grows `pages` until it covers `positions` positions of `page_size`; fails, leaving `pages`
  // as it was, when the pool runs out.
  Status reserve(std::vector<int32_t>& pages, int64_t positions, int64_t page_size);
  void release(std::vector<int32_t>& pages);

  int64_t capacity() const { return capacity_; }
  int64_t free() const { return static_cast<int64_t>(free_.size()); }
  int64_t used() const { return capacity_ - free(); }

 private:
  int64_t capacity_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
};

}  // namespace evt::model
