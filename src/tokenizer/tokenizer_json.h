#pragma once
// Reads a Hugging Face tokenizer.json into the parts Eventide supports: a byte-level BPE model,
// NFC or no normalizer, Split (Isolated) + ByteLevel pre-tokenizers, added tokens, and a
// TemplateProcessing post-processor. Anything else is an error naming the file and the JSON path.

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "util/status.h"

namespace evt::tokenizer {

struct SplitPattern {
  std::string pattern;
  bool literal = false;  // {"String": ...} rather than {"Regex": ...}
  std::string json_path;  // for errors found later, when the pattern is compiled
};

struct TokenizerJson {
  std::vector<std::pair<std::string, int32_t>> vocab;   // byte-level names as in the file
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool ignore_merges = false;
  bool nfc = false;
  std::vector<SplitPattern> splits;  // applied in order
  std::vector<AddedToken> added_tokens;
  std::vector<int32_t> prefix_ids;  // what add_special_tokens puts before the text...
  std::vector<int32_t> suffix_ids;  // ...and after it
};

Expected<TokenizerJson> read_tokenizer_json(const std::filesystem::path& path);

}  // namespace evt::tokenizer
