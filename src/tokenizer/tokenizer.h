#pragma once
// A Hugging Face tokenizer.json tokenizer: byte-level BPE as Qwen2/Qwen3 and Llama 3 use it.
//
// encode(): added tokens are split out first (on the raw text, then, for tokens marked
// "normalized", on the NFC-normalized rest), the rest is cut by the file's Split regexes and
// each piece goes through BPE. Input that is not well-formed UTF-8 does not fail: each maximal
// ill-formed run is encoded as its raw bytes, apart from the text around it, so no byte is lost
// (decode() shows those bytes as U+FFFD; Hugging Face itself accepts only valid strings).
// PCRE2 and ICU only ever see well-formed UTF-8.
//
// Thread-safe: encode() and decode() may be called concurrently on one Tokenizer.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/nfc.h"
#include "tokenizer/regex_splitter.h"
#include "util/status.h"

namespace evt::tokenizer {

class Tokenizer {
 public:
  static Expected<Tokenizer> load(const std::filesystem::path& tokenizer_json);

  // add_special_tokens: also add what the post-processor adds (Llama 3: <|begin_of_text|>).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // The text of `ids`; bytes that do not form UTF-8 become U+FFFD, as in Hugging Face.
  // skip_special: leave out added tokens marked special. Fails on an id the vocabulary lacks.
  Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The id of a token by its name in tokenizer.json ("<|im_end|>", or byte-level "Ġthe").
  std::optional<int32_t> token_id(std::string_view name) const;
  // The name of an id in tokenizer.json, nullopt where the vocabulary has none.
  std::optional<std::string_view> token_name(int32_t id) const;
  // The raw bytes an id decodes to (part of a UTF-8 character, possibly).
  std::optional<std::string_view> token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  // One past the largest id, the size an embedding table must have at least.
  int32_t vocab_size() const { return static_cast<int32_t>(names_.size()); }

 private:
  Tokenizer(BpeModel bpe, std::optional<NfcNormalizer> nfc) : bpe_(std::move(bpe)), nfc_(nfc) {}
  void encode_valid(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& ids) const;
  void pre_tokenize(std::string_view text, std::size_t split, std::vector<int32_t>& ids) const;
  Status check_id(int32_t id) const;

  BpeModel bpe_;
  std::optional<NfcNormalizer> nfc_;
  std::vector<RegexSplitter> splits_;
  AddedTokenMatcher raw_added_{{}};         // tokens with normalized: false
  AddedTokenMatcher normalized_added_{{}};  // tokens with normalized: true, content normalized
  std::vector<int32_t> prefix_ids_;
  std::vector<int32_t> suffix_ids_;

  // Per id; an empty name marks an id no token has.
  std::vector<std::string> names_;
  std::vector<std::string> bytes_;
  std::vector<bool> special_;
  std::unordered_map<std::string, int32_t> id_by_name_;
};

}  // namespace evt::tokenizer
