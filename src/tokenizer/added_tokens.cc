#include "tokenizer/added_tokens.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>

namespace evt::tokenizer {
namespace {

// Rust regex's \w, which Hugging Face uses for single_word: alphabetic, marks, decimal digits,
// connector punctuation and the join controls.
bool is_word_char(UChar32 c) {
  const int32_t category_mask = U_GET_GC_MASK(c);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (category_mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

UChar32 char_before(std::string_view text, std::size_t pos) {
  UChar32 c;
  auto i = static_cast<int32_t>(pos);
  U8_PREV(reinterpret_cast<const uint8_t*>(text.data()), 0, i, c);
  return c;
}

UChar32 char_at(std::string_view text, std::size_t pos) {
  UChar32 c;
  auto i = static_cast<int32_t>(pos);
  U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, static_cast<int32_t>(text.size()), c);
  return c;
}

// Start of the whitespace run that ends at `pos`.
std::size_t whitespace_start(std::string_view text, std::size_t pos) {
  auto i = static_cast<int32_t>(pos);
  while (i > 0) {
    int32_t before = i;
    UChar32 c;
    U8_PREV(reinterpret_cast<const uint8_t*>(text.data()), 0, before, c);
    if (!u_isUWhiteSpace(c)) break;
    i = before;
  }
  return i;
}

// End of the whitespace run that starts at `pos`.
std::size_t whitespace_end(std::string_view text, std::size_t pos) {
  auto i = static_cast<int32_t>(pos);
  while (i < static_cast<int32_t>(text.size())) {
    int32_t after = i;
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), after, static_cast<int32_t>(text.size()), c);
    if (!u_isUWhiteSpace(c)) break;
    i = after;
  }
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    if (!tokens_[i].content.empty()) by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](std::size_t a, std::size_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

bool AddedTokenMatcher::word_boundary_ok(std::string_view text, std::size_t begin, std::size_t end) const {
  const bool left_ok = begin == 0 || !is_word_char(char_before(text, begin));
  const bool right_ok = end == text.size() || !is_word_char(char_at(text, end));
  return left_ok && right_ok;
}

std::vector<AddedTokenMatcher::Piece> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Piece> pieces;
  std::size_t piece_start = 0;  // where the text not yet emitted begins
  std::size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* found = nullptr;
    for (std::size_t index : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos).starts_with(tokens_[index].content)) {
        found = &tokens_[index];
        break;
      }
    }
    if (!found) {
      ++pos;
      continue;
    }
    std::size_t begin = pos;
    std::size_t end = pos + found->content.size();
    // As in Hugging Face, a single_word token inside a word is passed over, and the scan goes
    // on after it rather than looking for shorter tokens at the same place.
    pos = end;
    if (found->single_word && !word_boundary_ok(text, begin, end)) continue;
    if (found->lstrip) begin = std::max(whitespace_start(text, begin), piece_start);
    if (found->rstrip) end = pos = whitespace_end(text, end);
    if (begin > piece_start) pieces.push_back({text.substr(piece_start, begin - piece_start), std::nullopt});
    pieces.push_back({text.substr(begin, end - begin), found->id});
    piece_start = end;
  }
  if (piece_start < text.size()) pieces.push_back({text.substr(piece_start), std::nullopt});
  return pieces;
}

}  // namespace evt::tokenizer
