#pragma once
// Tokens of the graph text form (text_form.h) and of the expressions and edge maps inside it.
//
// Every token carries its position in the enclosing source, also when the lexer runs over a
// part of it: an edge-map string is lexed on its own, with positions that still point into the
// file, so that a diagnostic about `k` in "ij->k" puts its caret under the `k`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace evt::ir {

// 1-based line and column (in bytes) of the byte at `offset`.
struct SourcePos {
  size_t offset = 0;
  int line = 1;
  int col = 1;
};

// The `n`-th byte after `p` on the same line.
inline SourcePos shifted(SourcePos p, size_t n) { return SourcePos{p.offset + n, p.line, p.col + static_cast<int>(n)}; }

// A named text, for diagnostics of the form
//   file:3:14: error: unknown dimension 'X'
//   A = buffer((X, 4), f32)
//               ^
class SourceText {
 public:
  SourceText(std::string_view text, std::string_view filename) : text_(text), filename_(filename) {}
  std::string_view text() const { return text_; }
  Status error_at(SourcePos pos, std::string_view message) const;

 private:
  std::string_view text_;
  std::string filename_;
};

enum class Tok : uint8_t {
  kIdent,
  kInt,
  kString,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kComma,
  kColon,
  kAssign,
  kPlus,
  kMinus,
  kStar,
  kFloorDiv,
  kPercent,
  kArrow,
  kNewline,
  kEnd,
  kError,  // a malformed token; `message` says why
};

struct Token {
  Tok kind = Tok::kEnd;
  // The spelling; for kString the contents between the quotes (which start one byte after pos).
  std::string_view text;
  SourcePos pos;
  int64_t value = 0;    // kInt
  std::string message;  // kError
};

// How a token kind is named in "expected ..." messages: "')'", "end of line".
std::string_view tok_name(Tok kind);
// How a token is named in "... found ..." messages: "'foo'", "string \"ij->i\"".
std::string describe(const Token& t);
bool is_opener(Tok kind);
bool is_closer(Tok kind);
Tok closer_of(Tok opener);

class Lexer {
 public:
  enum class Mode {
    // Graph files: `#` starts a comment; a newline ends a statement unless inside (), [] or {}.
    kGraph,
    // Expressions and edge maps: newlines are blanks and there are no comments.
    kInline,
  };

  // Lexes `region`, whose first byte lies at `origin` in the enclosing source.
  Lexer(std::string_view region, SourcePos origin, Mode mode)
      : text_(region), mode_(mode), origin_offset_(origin.offset), line_(origin.line), col_(origin.col) {}

  // The next token; kEnd at the end of the region, for good. Lexing errors come back as kError
  // tokens so that the parser reports them in source order with the rest.
  Token next();

 private:
  SourcePos pos() const { return SourcePos{origin_offset_ + i_, line_, col_}; }
  bool at_end() const { return i_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < text_.size() ? text_[i_ + ahead] : '\0'; }
  void advance(size_t n = 1);
  void skip_blanks();
  Token identifier(SourcePos start);
  Token integer(SourcePos start);
  Token quoted(SourcePos start);
  Token punctuation(SourcePos start);

  std::string_view text_;
  Mode mode_;
  size_t origin_offset_;
  size_t i_ = 0;
  int line_;
  int col_;
  int depth_ = 0;  // open (), [] and {}: newlines inside them do not end a statement
};

}  // namespace evt::ir
