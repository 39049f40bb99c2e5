#pragma once
// Integer rounding for sizes and tile counts (non-negative a, positive b).

#include <cstdint>

namespace evt {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace evt
