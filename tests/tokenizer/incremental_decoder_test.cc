// Streaming decode on hand-picked byte splits; reference_test.cc checks it against whole
// decodes of every reference case.

#include "tokenizer/incremental_decoder.h"

#include <gtest/gtest.h>

#include "tokenizer/utf8.h"

namespace evt::tokenizer {
namespace {

const Tokenizer& llama3_style() {
  static const Tokenizer tokenizer = [] {
    auto loaded = Tokenizer::load(std::string(EVT_SOURCE_DIR) + "/models/tokenizers/llama3-style/tokenizer.json");
    EVT_CHECK(loaded.ok()) << loaded.status().message();
    return std::move(*loaded);
  }();
  return tokenizer;
}

// The id of the single-byte token for `byte`.
int32_t byte_id(uint8_t byte) { return llama3_style().encode(std::string(1, static_cast<char>(byte)))[0]; }

TEST(IncrementalDecoder, HoldsBackACharacterUntilItIsComplete) {
  IncrementalDecoder decoder(llama3_style());
  // U+1F642 (🙂) is F0 9F 99 82; byte by byte nothing comes out until the last.
  EXPECT_EQ(*decoder.push(byte_id('a')), "a");
  EXPECT_EQ(*decoder.push(byte_id(0xF0)), "");
  EXPECT_EQ(*decoder.push(byte_id(0x9F)), "");
  EXPECT_EQ(*decoder.push(byte_id(0x99)), "");
  EXPECT_EQ(*decoder.push(byte_id(0x82)), "🙂");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, BrokenBytesBecomeReplacementCharacters) {
  IncrementalDecoder decoder(llama3_style());
  EXPECT_EQ(*decoder.push(byte_id(0xE4)), "");
  EXPECT_EQ(*decoder.push(byte_id('x')), "\uFFFDx");  // the E4 can no longer be completed
  EXPECT_EQ(*decoder.push(byte_id(0x80)), "\uFFFD");  // a lone continuation byte never can
  EXPECT_EQ(*decoder.push(byte_id(0xE4)), "");
  EXPECT_EQ(*decoder.push(byte_id(0xB8)), "");
  EXPECT_EQ(decoder.flush(), "\uFFFD");  // the stream ended inside a character
}

TEST(IncrementalDecoder, SkipsSpecialTokensAndRejectsUnknownIds) {
  const Tokenizer& tok = llama3_style();
  const int32_t eot = *tok.token_id("<|eot_id|>");
  IncrementalDecoder keep(tok);
  IncrementalDecoder skip(tok, /*skip_special=*/true);
  EXPECT_EQ(*keep.push(eot), "<|eot_id|>");
  EXPECT_EQ(*skip.push(eot), "");
  auto unknown = keep.push(tok.vocab_size());
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "token id 6011 is not in the vocabulary (ids 0..6010)");
}

TEST(Utf8, CompletePrefixStopsOnlyAtUnfinishedCharacters) {
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("ab\xe4\xb8"), 2u);          // 3-byte character, 2 received
  EXPECT_EQ(complete_utf8_prefix("ab\xe4\xb8\xad"), 5u);      // complete
  EXPECT_EQ(complete_utf8_prefix("ab\xc0"), 3u);              // C0 never starts a character
  EXPECT_EQ(complete_utf8_prefix("ab\xed\xa0"), 4u);          // ED A0 would be a surrogate
  EXPECT_EQ(complete_utf8_prefix("ab\xf4\x8f\xbf"), 2u);      // U+10FFFF, one byte short
  EXPECT_EQ(complete_utf8_prefix("ab\x80"), 3u);              // a stray continuation byte
}

}  // namespace
}  // namespace evt::tokenizer
