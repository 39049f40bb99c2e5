#pragma once
// Streaming decode: feed ids one at a time as they are sampled and get back only whole UTF-8
// characters. A token that ends inside a character (byte-level BPE splits emoji and CJK across
// tokens) has its trailing bytes held until the next token completes them; bytes that can no
// longer form a character come out as U+FFFD. The pieces joined equal Tokenizer::decode.

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace evt::tokenizer {

class IncrementalDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}

  // The text `id` completes (often empty or one character short); fails on an unknown id.
  Expected<std::string> push(int32_t id);
  // At the end of the stream: the held bytes, each incomplete character as U+FFFD.
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;  // at most 3 bytes of an unfinished character
};

}  // namespace evt::tokenizer
