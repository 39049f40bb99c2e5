#pragma once
// UTF-8 validity helpers, built on ICU's U8_NEXT so that ill-formed input is split into maximal
// subparts exactly as Hugging Face (Rust's from_utf8_lossy) and WHATWG do.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace evt::tokenizer {

// Calls `run(bytes, valid)` for each maximal run of well-formed or of ill-formed UTF-8, in order.
void for_each_utf8_run(std::string_view text, const std::function<void(std::string_view, bool)>& run);

// Appends `bytes` to `out`, each maximal ill-formed subpart replaced by U+FFFD.
void append_lossy_utf8(std::string& out, std::string_view bytes);

// Length of the longest prefix of `bytes` after which no character is cut: a trailing lead byte
// with some, not all, of its continuation bytes is left out, since more bytes may complete it.
std::size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace evt::tokenizer
