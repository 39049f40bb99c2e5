#pragma once
// The NFC normalizer (tokenizer.json "normalizer": {"type": "NFC"}), done by ICU.

#include <string>
#include <string_view>

#include "util/check.h"
#include "util/status.h"

namespace evt::tokenizer {

class NfcNormalizer {
 public:
  // Fails only when ICU's normalization data cannot be loaded.
  static Expected<NfcNormalizer> create();

  // `text` must be well-formed UTF-8. Text already in NFC (the common case) is copied unchanged.
  std::string normalize(std::string_view text) const;

 private:
  explicit NfcNormalizer(const void* icu_normalizer) : icu_normalizer_(icu_normalizer) {}
  const void* icu_normalizer_;  // an icu::Normalizer2 owned by ICU; void keeps ICU out of this header
};

}  // namespace evt::tokenizer
