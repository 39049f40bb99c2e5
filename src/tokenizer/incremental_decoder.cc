#include "tokenizer/incremental_decoder.h"

#include "tokenizer/utf8.h"

namespace evt::tokenizer {

Expected<std::string> IncrementalDecoder::push(int32_t id) {
  std::optional<std::string_view> bytes = tokenizer_->token_bytes(id);
  if (!bytes) return error("token id {} is not in the vocabulary (ids 0..{})", id, tokenizer_->vocab_size() - 1);
  if (skip_special_ && tokenizer_->is_special(id)) return std::string();
  pending_ += *bytes;
  const std::size_t complete = complete_utf8_prefix(pending_);
  std::string text;
  append_lossy_utf8(text, std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return text;
}

std::string IncrementalDecoder::flush() {
  std::string text;
  append_lossy_utf8(text, pending_);
  pending_.clear();
  return text;
}

}  // namespace evt::tokenizer
