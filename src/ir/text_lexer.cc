#include "ir/text_lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace evt::ir {

Status SourceText::error_at(SourcePos pos, std::string_view message) const {
  const size_t offset = std::min(pos.offset, text_.size());
  const size_t last_newline = text_.substr(0, offset).rfind('\n');
  const size_t begin = last_newline == std::string_view::npos ? 0 : last_newline + 1;
  const size_t end = std::min(text_.find('\n', offset), text_.size());
  std::string_view line = text_.substr(begin, end - begin);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Keep tabs in the padding so that the caret lines up however tabs are displayed.
  std::string pad;
  for (char c : text_.substr(begin, offset - begin)) pad += c == '\t' ? '\t' : ' ';
  return Status::error(fmt::format("{}:{}:{}: error: {}\n{}\n{}^", filename_, pos.line, pos.col, message, line, pad));
}

std::string_view tok_name(Tok kind) {
  switch (kind) {
    case Tok::kIdent: return "a name";
    case Tok::kInt: return "an integer";
    case Tok::kString: return "a string";
    case Tok::kLParen: return "'('";
    case Tok::kRParen: return "')'";
    case Tok::kLBracket: return "'['";
    case Tok::kRBracket: return "']'";
    case Tok::kLBrace: return "'{'";
    case Tok::kRBrace: return "'}'";
    case Tok::kComma: return "','";
    case Tok::kColon: return "':'";
    case Tok::kAssign: return "'='";
    case Tok::kPlus: return "'+'";
    case Tok::kMinus: return "'-'";
    case Tok::kStar: return "'*'";
    case Tok::kFloorDiv: return "'//'";
    case Tok::kPercent: return "'%'";
    case Tok::kArrow: return "'->'";
    case Tok::kNewline: return "end of line";
    case Tok::kEnd: return "end of input";
    case Tok::kError: return "an invalid token";
  }
  return "?";
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kIdent:
    case Tok::kInt: return fmt::format("'{}'", t.text);
    case Tok::kString: return fmt::format("string \"{}\"", t.text);
    default: return std::string(tok_name(t.kind));
  }
}

bool is_opener(Tok kind) { return kind == Tok::kLParen || kind == Tok::kLBracket || kind == Tok::kLBrace; }
bool is_closer(Tok kind) { return kind == Tok::kRParen || kind == Tok::kRBracket || kind == Tok::kRBrace; }

Tok closer_of(Tok opener) {
  switch (opener) {
    case Tok::kLParen: return Tok::kRParen;
    case Tok::kLBracket: return Tok::kRBracket;
    default: return Tok::kRBrace;
  }
}

namespace {
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

Token error_token(SourcePos start, std::string message) {
  Token t;
  t.kind = Tok::kError;
  t.pos = start;
  t.message = std::move(message);
  return t;
}
}  // namespace

void Lexer::advance(size_t n) {
  for (; n > 0 && !at_end(); --n, ++i_) {
    if (text_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
  }
}

void Lexer::skip_blanks() {
  while (!at_end()) {
    const char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      advance();
    } else if (c == '\n' && (mode_ == Mode::kInline || depth_ > 0)) {
      advance();
    } else if (c == '#' && mode_ == Mode::kGraph) {
      while (!at_end() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

Token Lexer::next() {
  skip_blanks();
  const SourcePos start = pos();
  if (at_end()) return Token{Tok::kEnd, {}, start, 0, {}};
  const char c = peek();
  if (c == '\n') {
    advance();
    return Token{Tok::kNewline, "\n", start, 0, {}};
  }
  if (is_ident_start(c)) return identifier(start);
  if (is_digit(c)) return integer(start);
  if (c == '"' || c == '\'') return quoted(start);
  return punctuation(start);
}

Token Lexer::identifier(SourcePos start) {
  const size_t begin = i_;
  while (!at_end() && is_ident_char(peek())) advance();
  return Token{Tok::kIdent, text_.substr(begin, i_ - begin), start, 0, {}};
}

Token Lexer::integer(SourcePos start) {
  const size_t begin = i_;
  int64_t value = 0;
  bool overflow = false;
  for (; !at_end() && is_digit(peek()); advance()) {
    const int digit = peek() - '0';
    overflow = overflow || value > (std::numeric_limits<int64_t>::max() - digit) / 10;
    if (!overflow) value = value * 10 + digit;
  }
  std::string_view spelling = text_.substr(begin, i_ - begin);
  if (overflow) return error_token(start, fmt::format("integer literal '{}' is too large", spelling));
  return Token{Tok::kInt, spelling, start, value, {}};
}

// Strings hold edge maps, so there are no escapes; a string ends at its line.
Token Lexer::quoted(SourcePos start) {
  const char quote = peek();
  advance();
  const size_t begin = i_;
  while (!at_end() && peek() != quote && peek() != '\n') advance();
  if (peek() != quote) return error_token(start, "unterminated string");
  std::string_view contents = text_.substr(begin, i_ - begin);
  advance();
  return Token{Tok::kString, contents, start, 0, {}};
}

Token Lexer::punctuation(SourcePos start) {
  // Two-character spellings come first: `->` is not `-` followed by `>`.
  static constexpr struct {
    std::string_view spelling;
    Tok kind;
  } kPunctuation[] = {
      {"->", Tok::kArrow},   {"//", Tok::kFloorDiv}, {"(", Tok::kLParen}, {")", Tok::kRParen}, {"[", Tok::kLBracket},
      {"]", Tok::kRBracket}, {"{", Tok::kLBrace},    {"}", Tok::kRBrace}, {",", Tok::kComma},  {":", Tok::kColon},
      {"=", Tok::kAssign},   {"+", Tok::kPlus},      {"-", Tok::kMinus},  {"*", Tok::kStar},   {"%", Tok::kPercent},
  };
  const std::string_view rest = text_.substr(i_);
  for (const auto& p : kPunctuation) {
    if (!rest.starts_with(p.spelling)) continue;
    advance(p.spelling.size());
    if (is_opener(p.kind)) ++depth_;
    if (is_closer(p.kind) && depth_ > 0) --depth_;
    return Token{p.kind, rest.substr(0, p.spelling.size()), start, 0, {}};
  }
  const unsigned char c = static_cast<unsigned char>(peek());
  advance();
  if (c == '/') return error_token(start, "unexpected '/': integer division is written '//'");
  if (c >= 0x21 && c < 0x7f) return error_token(start, fmt::format("unexpected character '{}'", static_cast<char>(c)));
  return error_token(start, fmt::format("unexpected byte 0x{:02x}", c));
}

}  // namespace evt::ir
