#pragma once
// GPT-2's byte-level alphabet: HF byte-level vocabularies name byte b by a printable character
// (space is "Ġ", newline "Ċ"). Eventide keeps tokens as raw bytes and converts names at load.

#include <optional>
#include <string>
#include <string_view>

namespace evt::tokenizer {

// The raw bytes a byte-level token name stands for; nullopt if a character is outside the alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view name);

// What the ByteLevel decoder turns a token name into: its bytes, or, for a name with characters
// outside the alphabet (added tokens such as "<|im end|>" with a space), the name itself.
std::string decoded_bytes(std::string_view name);

}  // namespace evt::tokenizer
