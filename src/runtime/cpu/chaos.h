#pragma once
// Chaos mode: seeded random delays at the points where a schedule's correctness depends on
// ordering (before waits, between running and notifying, between notifications), and random
// orders of released tasks. A failure reproduces with the same seed and worker count.

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace evt::runtime::cpu {

class Chaos {
 public:
  Chaos(std::optional<uint64_t> seed, int worker)
      : enabled_(seed.has_value()), rng_(seed.value_or(0) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(worker)) {}

  bool enabled() const { return enabled_; }

  void maybe_delay() {
    if (!enabled_) return;
    const uint64_t r = rng_();
    if (r % 4 == 0) std::this_thread::yield();
    if (r % 32 == 1) std::this_thread::sleep_for(std::chrono::microseconds((r >> 8) % 50));
  }

  template <typename T>
  void shuffle(std::vector<T>& v) {
    if (enabled_) std::shuffle(v.begin(), v.end(), rng_);
  }

 private:
  bool enabled_;
  std::mt19937_64 rng_;
};

}  // namespace evt::runtime::cpu
