// RoPE inverse frequencies against values worked out by hand.

#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "model/presets.h"

namespace evt::model {
namespace {

ModelConfig rope_config(double theta, int64_t head_dim, std::optional<Llama3RopeScaling> scaling = std::nullopt) {
  ModelConfig c = *preset_config("llama-3.1-8b");
  c.rope_theta = theta;
  c.head_dim = head_dim;
  c.rope_scaling = scaling;
  return c;
}

TEST(Rope, DefaultFrequencies) {
  // theta^(-2i/d): 10000^0 and 10000^(-2/4).
  EXPECT_EQ(rope_inv_freq(rope_config(10000, 4)), (std::vector<float>{1.0f, 0.01f}));
  const std::vector<float> qwen = rope_inv_freq(*preset_config("qwen3-0.6b"));
  ASSERT_EQ(qwen.size(), 64u);
  EXPECT_EQ(qwen[0], 1.0f);
  EXPECT_EQ(qwen[32], 1e-3f);  // 1e6^(-64/128)
  EXPECT_FLOAT_EQ(qwen[16], static_cast<float>(std::pow(10.0, -1.5)));  // 1e6^(-32/128)
}

TEST(Rope, Llama3ScalingKeepsShortStretchesLongAndBlendsBetween) {
  // theta 4096 and head_dim 6 give inv_freq 1, 1/16, 1/256, i.e. wavelengths 2pi, 32pi, 512pi.
  // With an original context of 256 and factors low 1, high 8: wavelengths below 256/8 = 32 stay,
  // above 256/1 are divided by 8, and 32pi (in between) blends with
  // smooth = (256 / (32pi) - 1) / (8 - 1) = (8/pi - 1) / 7, giving
  // (1/16) * ((1 - smooth) / 8 + smooth) = (1/16) * (1/8 + (8/pi - 1) / 8) = 1 / (16 pi).
  const Llama3RopeScaling s{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 8,
                            .original_max_position_embeddings = 256};
  const std::vector<float> inv = rope_inv_freq(rope_config(4096, 6, s));
  ASSERT_EQ(inv.size(), 3u);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[1], static_cast<float>(1 / (16 * std::numbers::pi)));
  EXPECT_FLOAT_EQ(inv[2], 1.0f / 2048);
}

TEST(Rope, Llama31PresetEnds) {
  const std::vector<float> inv = rope_inv_freq(*preset_config("llama-3.1-8b"));
  ASSERT_EQ(inv.size(), 64u);
  EXPECT_EQ(inv[0], 1.0f);  // wavelength 2pi: high frequency, unscaled
  // The lowest frequency, wavelength ~1.2e6 > 8192: divided by factor 8.
  EXPECT_FLOAT_EQ(inv[63], static_cast<float>(std::pow(500000.0, -126.0 / 128) / 8));
  // Index 20: 500000^(-40/128) = 0.0166, wavelength 379 < 8192/4: unscaled.
  EXPECT_FLOAT_EQ(inv[20], static_cast<float>(std::pow(500000.0, -40.0 / 128)));
}

}  // namespace
}  // namespace evt::model
