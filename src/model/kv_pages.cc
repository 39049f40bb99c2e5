#include "model/kv_pages.h"

#include "util/check.h"

namespace evt::model {

KvPages::KvPages(int64_t pages) : capacity_(pages) {
  for (int64_t p = pages; p-- > 0;) free_.push_back(static_cast<int32_t>(p));
}

Status KvPages::reserve(std::vector<int32_t>& pages, int64_t positions, int64_t page_size) {
  const int64_t need = (positions + page_size - 1) / page_size - static_cast<int64_t>(pages.size());
  if (need > static_cast<int64_t>(free_.size())) {
    return error("the KV cache is full: {} more pages needed, {} of {} free", need, free_.size(), capacity_);
  }
  for (int64_t i = 0; i < need; ++i) {
    pages.push_back(free_.back());
    free_.pop_back();
  }
  return Status();
}

void KvPages::release(std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    EVT_CHECK(p >= 0 && p < capacity_) << "page " << p << " is not from this pool";
    free_.push_back(p);
  }
  pages.clear();
}

}  // namespace evt::model
