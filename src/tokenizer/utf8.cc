#include "tokenizer/utf8.h"

#include <unicode/utf8.h>

#include <cstdint>

namespace evt::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Decodes the character at `i`, advancing `i` past it (or past one ill-formed maximal subpart).
bool next_is_valid(std::string_view text, int32_t& i) {
  UChar32 c;
  U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, static_cast<int32_t>(text.size()), c);
  return c >= 0;
}

}  // namespace

void for_each_utf8_run(std::string_view text, const std::function<void(std::string_view, bool)>& run) {
  int32_t run_start = 0;
  bool run_valid = true;
  for (int32_t i = 0; i < static_cast<int32_t>(text.size());) {
    const int32_t start = i;
    const bool valid = next_is_valid(text, i);
    if (valid != run_valid) {
      if (start > run_start) run(text.substr(run_start, start - run_start), run_valid);
      run_start = start;
      run_valid = valid;
    }
  }
  if (static_cast<std::size_t>(run_start) < text.size()) run(text.substr(run_start), run_valid);
}

void append_lossy_utf8(std::string& out, std::string_view bytes) {
  for (int32_t i = 0; i < static_cast<int32_t>(bytes.size());) {
    const int32_t start = i;
    if (next_is_valid(bytes, i)) {
      out.append(bytes.substr(start, i - start));
    } else {
      out.append(kReplacement);
    }
  }
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  for (int32_t i = 0; i < static_cast<int32_t>(bytes.size());) {
    const int32_t start = i;
    const auto lead = static_cast<uint8_t>(bytes[start]);
    // An error whose maximal subpart runs to the end and starts at a lead byte is a character
    // still being received, not a broken one.
    if (!next_is_valid(bytes, i) && static_cast<std::size_t>(i) == bytes.size() && lead >= 0xC2 && lead <= 0xF4) {
      return start;
    }
  }
  return bytes.size();
}

}  // namespace evt::tokenizer
