#pragma once
// The Split pre-tokenizer with behavior "Isolated": the text is cut at every match of the
// tokenizer.json's pattern and both the matches and the text between them become pieces.
// Hugging Face runs these patterns with Oniguruma; PCRE2 with UTF and UCP reads the same syntax
// (\p{L}, \p{N}, (?i:...), lookahead) the same way on the Qwen and Llama 3 patterns.

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace evt::tokenizer {

class RegexSplitter {
 public:
  // `literal`: the pattern is a plain string (tokenizer.json's {"String": ...}), not a regex.
  static Expected<RegexSplitter> compile(const std::string& pattern, bool literal);

  // The pieces of `text`, which must be well-formed UTF-8 (it is not checked again here).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct CodeDeleter {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
  };
  std::unique_ptr<pcre2_code, CodeDeleter> code_;
};

}  // namespace evt::tokenizer
