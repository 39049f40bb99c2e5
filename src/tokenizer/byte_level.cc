#include "tokenizer/byte_level.h"

#include <unicode/utf8.h>

#include <array>
#include <cstdint>

namespace evt::tokenizer {
namespace {

// byte_of[c] for code points c < 324 (the alphabet's largest is U+0143); -1 where none.
std::array<int16_t, 324> make_byte_of() {
  std::array<int16_t, 324> byte_of;
  byte_of.fill(-1);
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_of[printable ? b : next_extra++] = static_cast<int16_t>(b);
  }
  return byte_of;
}

}  // namespace

std::optional<std::string> byte_level_to_bytes(std::string_view name) {
  static const std::array<int16_t, 324> byte_of = make_byte_of();
  std::string bytes;
  bytes.reserve(name.size());
  for (int32_t i = 0; i < static_cast<int32_t>(name.size());) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(name.data()), i, static_cast<int32_t>(name.size()), c);
    if (c < 0 || c >= static_cast<UChar32>(byte_of.size()) || byte_of[c] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte_of[c]));
  }
  return bytes;
}

std::string decoded_bytes(std::string_view name) {
  std::optional<std::string> bytes = byte_level_to_bytes(name);
  return bytes ? *std::move(bytes) : std::string(name);
}

}  // namespace evt::tokenizer
