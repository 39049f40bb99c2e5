#include "server/stop_strings.h"

#include <algorithm>
#include <utility>

namespace evt::server {

namespace {

// The length of the longest suffix of `text` that is a proper prefix of `stop`.
size_t partial_match(std::string_view text, std::string_view stop) {
  for (size_t n = std::min(text.size(), stop.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == stop.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

std::string StopMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  // Everything before held_ was checked to start no stop string, so searching held_ suffices.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  size_t keep = 0;
  for (const std::string& stop : stops_) keep = std::max(keep, partial_match(held_, stop));
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(held_, {});
}

}  // namespace evt::server
