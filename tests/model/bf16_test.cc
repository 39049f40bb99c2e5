// bf16 conversions: round-to-nearest-even, ties, NaN, Inf, subnormals.

#include "model/bf16.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace evt::model {
namespace {

uint16_t bf16_of_bits(uint32_t float_bits) { return float_to_bf16(std::bit_cast<float>(float_bits)); }

TEST(Bf16, ExactValuesAndRounding) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16_of_bits(0x3f807fff), 0x3f80);  // below half: down
  EXPECT_EQ(bf16_of_bits(0x3f808001), 0x3f81);  // above half: up
  EXPECT_EQ(bf16_of_bits(0x3f808000), 0x3f80);  // tie, to even (down)
  EXPECT_EQ(bf16_of_bits(0x3f818000), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(bf16_of_bits(0xbf818000), 0xbf82);  // ties to even also for negatives
  EXPECT_EQ(bf16_of_bits(0x007f8000), 0x0080);  // a subnormal tie carries into the smallest normal
  EXPECT_EQ(bf16_to_float(0x3f81), 1.0f + 1.0f / 128);
}

TEST(Bf16, InfNanAndOverflow) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up past the largest bf16
  EXPECT_EQ(bf16_of_bits(0x7fc00000), 0x7fc0);
  // NaNs whose payload lies only in the dropped half must stay NaN, keeping their sign.
  EXPECT_EQ(bf16_of_bits(0x7f800001), 0x7fc0);
  EXPECT_EQ(bf16_of_bits(0xff80ffff), 0xffc0);
  EXPECT_TRUE(std::isnan(bf16_to_float(bf16_of_bits(0x7fffffff))));
}

TEST(Bf16, Fp16ToFloatIsExact) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);                       // largest half
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));          // smallest normal
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));          // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x03ff), std::ldexp(1023.0f, -24));       // largest subnormal
  EXPECT_EQ(fp16_to_float(0x8201), -std::ldexp(513.0f, -24));       // negative subnormal
  EXPECT_EQ(std::bit_cast<uint32_t>(fp16_to_float(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(fp16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7c01)));
  // Every finite half survives the round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    const float f = fp16_to_float(static_cast<uint16_t>(h));
    const int exponent = (h >> 10) & 0x1f;
    const float expected = std::ldexp(float((h & 0x3ff) | (exponent ? 0x400 : 0)), (exponent ? exponent : 1) - 25);
    ASSERT_EQ(f, (h & 0x8000) ? -expected : expected) << std::hex << h;
  }
}

TEST(Bf16, Fp16TiesRoundToEvenInOneStep) {
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8: to 1 + 2^-6.
  EXPECT_EQ(float_to_bf16(fp16_to_float(0x3c04)), 0x3f80);
  EXPECT_EQ(float_to_bf16(fp16_to_float(0x3c0c)), 0x3f82);
  EXPECT_EQ(float_to_bf16(fp16_to_float(0x7c00)), 0x7f80);
  EXPECT_EQ(float_to_bf16(fp16_to_float(0xfe00)), 0xffc0);
}

}  // namespace
}  // namespace evt::model
