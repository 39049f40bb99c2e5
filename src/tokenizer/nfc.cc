#include "tokenizer/nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

namespace evt::tokenizer {
namespace {

const icu::Normalizer2& icu_nfc(const void* normalizer) { return *static_cast<const icu::Normalizer2*>(normalizer); }

}  // namespace

Expected<NfcNormalizer> NfcNormalizer::create() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return error("ICU has no NFC normalizer: {}", u_errorName(status));
  return NfcNormalizer(normalizer);
}

std::string NfcNormalizer::normalize(std::string_view text) const {
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (icu_nfc(icu_normalizer_).isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  std::string normalized;
  icu::StringByteSink<std::string> sink(&normalized);
  status = U_ZERO_ERROR;
  icu_nfc(icu_normalizer_).normalizeUTF8(0, piece, sink, nullptr, status);
  EVT_CHECK(U_SUCCESS(status)) << "ICU NFC failed on well-formed UTF-8: " << u_errorName(status);
  return normalized;
}

}  // namespace evt::tokenizer
