#include "tokenizer/regex_splitter.h"

namespace evt::tokenizer {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

}  // namespace

Expected<RegexSplitter> RegexSplitter::compile(const std::string& pattern, bool literal) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  RegexSplitter splitter;
  splitter.code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                                     &error_code, &error_offset, nullptr));
  if (!splitter.code_) {
    return error("pattern does not compile at offset {}: {}", error_offset, pcre2_message(error_code));
  }
  // JIT is only a speed-up: where the platform has none, the interpreter gives the same matches.
  pcre2_jit_compile(splitter.code_.get(), PCRE2_JIT_COMPLETE);
  return splitter;
}

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t piece_start = 0;
  std::size_t search_from = 0;
  while (search_from < text.size()) {
    const int rc = pcre2_match(code_.get(), subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc < 0) break;  // PCRE2_ERROR_NOMATCH, or a resource limit: the rest stays one piece
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (begin == end) {
      // An empty match cuts nothing; step over one whole character and search again.
      search_from = end + 1;
      while (search_from < text.size() && (static_cast<uint8_t>(text[search_from]) & 0xC0) == 0x80) ++search_from;
      continue;
    }
    if (begin > piece_start) pieces.push_back(text.substr(piece_start, begin - piece_start));
    pieces.push_back(text.substr(begin, end - begin));
    piece_start = search_from = end;
  }
  if (piece_start < text.size()) pieces.push_back(text.substr(piece_start));
  return pieces;
}

}  // namespace evt::tokenizer
