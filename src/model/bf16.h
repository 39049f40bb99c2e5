#pragma once
// bfloat16 conversions used when a checkpoint stores fp16 or fp32: the engine keeps every weight
// as bf16 bits in uint16_t. Round-to-nearest-even like torch's .to(torch.bfloat16), so a
// converted checkpoint matches what the reference implementation computes with.

#include <bit>
#include <cstdint>

namespace evt::model {

constexpr uint16_t float_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // A NaN whose payload sits only in the low half would round to Inf; keep it a quiet NaN.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

constexpr float bf16_to_float(uint16_t value) { return std::bit_cast<float>(static_cast<uint32_t>(value) << 16); }

// IEEE binary16 to float is exact (subnormals included), so fp16 -> float -> bf16 rounds once.
constexpr float fp16_to_float(uint16_t value) {
  const uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  const uint32_t exponent = (value >> 10) & 0x1fu;
  uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // Inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);  // +-0
  // Subnormal: shift the leading one into the implicit bit, lowering the exponent to match.
  uint32_t float_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --float_exponent;
  }
  return std::bit_cast<float>(sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

}  // namespace evt::model
