#pragma once
// Finds added tokens (special or not) in text before the BPE sees it, with Hugging Face's rules:
// leftmost-longest matches; single_word tokens only between non-word characters; lstrip and
// rstrip tokens take the whitespace beside them along.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evt::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // skipped by decode(skip_special_tokens)
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;   // matched in normalized text rather than the raw input
};

class AddedTokenMatcher {
 public:
  struct Piece {
    std::string_view text;
    std::optional<int32_t> id;  // set where the piece is an added token
  };

  // `tokens` with their content as it is to be matched (normalized already where that applies).
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  // `text` split into added tokens and the text between them (well-formed UTF-8).
  std::vector<Piece> split(std::string_view text) const;

 private:
  bool word_boundary_ok(std::string_view text, std::size_t begin, std::size_t end) const;

  std::vector<AddedToken> tokens_;
  // Token indices by first byte, longest content first, so a scan finds the longest at once.
  std::vector<std::vector<std::size_t>> by_first_byte_ = std::vector<std::vector<std::size_t>>(256);
};

}  // namespace evt::tokenizer
