// Parser of the graph text form (text_form.h): recursive descent over text_lexer's tokens.
//
// The graph parser checks names as it goes (everything is declared before use), so that every
// error points at the token at fault. An edge-map string is parsed by a parser of its own over
// the string's contents, with positions inside the file and messages prefixed by the string.

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "ir/text_form.h"
#include "ir/text_lexer.h"

namespace evt::ir {

namespace {

// Limits that keep hostile inputs from overflowing the stack: kMaxNesting bounds the parser's
// own recursion; kMaxOperators bounds the depth of left-associative chains like `a+a+...+a`,
// which the parser builds in a loop but which every later pass walks recursively.
constexpr int kMaxNesting = 200;
constexpr int kMaxOperators = 10000;

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// One token of lookahead over a Lexer, and the diagnostics all parts of the parser share.
class TokenStream {
 public:
  // `context` prefixes every message, e.g. `edge map "ij->k": `.
  TokenStream(const SourceText& src, std::string_view region, SourcePos origin, Lexer::Mode mode,
              std::string context = {})
      : src_(src), lexer_(region, origin, mode), context_(std::move(context)), cur_(lexer_.next()) {}

  const Token& cur() const { return cur_; }
  bool at(Tok kind) const { return cur_.kind == kind; }
  Token take() {
    Token t = std::move(cur_);
    cur_ = lexer_.next();
    return t;
  }
  bool accept(Tok kind) {
    if (!at(kind)) return false;
    take();
    return true;
  }
  // A lexer just past the current token, for looking further ahead without consuming.
  Lexer lookahead() const { return lexer_; }

  Status error_at(SourcePos pos, std::string_view message) const {
    return src_.error_at(pos, context_ + std::string(message));
  }
  // The current token is not one the grammar allows here; `expected` says what would be.
  Status unexpected(std::string_view expected) const {
    if (at(Tok::kError)) return error_at(cur_.pos, cur_.message);
    return error_at(cur_.pos, fmt::format("expected {}, found {}", expected, describe(cur_)));
  }
  Status expect(Tok kind, std::string_view expected = {}) {
    if (accept(kind)) return Status();
    return unexpected(expected.empty() ? tok_name(kind) : expected);
  }
  Expected<Token> expect_token(Tok kind, std::string_view expected) {
    if (!at(kind)) return unexpected(expected);
    return take();
  }

  // Consumes the closer of `open`. An unclosed bracket is reported where it opened: newlines
  // inside brackets do not end a statement, so the mismatch may only show much further on.
  Status close(const Token& open, std::string_view expected) {
    if (accept(closer_of(open.kind))) return Status();
    if (at(Tok::kEnd)) return error_at(open.pos, fmt::format("'{}' is never closed", open.text));
    if (!at(Tok::kError) && cur_.pos.line != open.pos.line) {
      return error_at(cur_.pos, fmt::format("expected {} to close the '{}' on line {}, found {}", expected, open.text,
                                            open.pos.line, describe(cur_)));
    }
    return unexpected(expected);
  }

  // `open item (',' item)* [','] close`, as in `(B, 4)`, `(A,)`, `()` or `{E: "i->i"}`;
  // `expected` names the whole in case the opener is missing.
  template <typename T, typename F>
  Expected<std::vector<T>> list(Tok open_kind, std::string_view expected, F&& item) {
    EVT_ASSIGN_OR_RETURN(const Token open, expect_token(open_kind, expected));
    const Tok closer = closer_of(open_kind);
    std::vector<T> items;
    while (!at(closer) && !at(Tok::kEnd)) {
      EVT_ASSIGN_OR_RETURN(T x, item());
      items.push_back(std::move(x));
      if (!accept(Tok::kComma)) break;
    }
    EVT_RETURN_IF_ERROR(close(open, fmt::format("',' or {}", tok_name(closer))));
    return items;
  }

 private:
  const SourceText& src_;
  Lexer lexer_;
  std::string context_;
  Token cur_;
};

// Whether the bracketed group that `probe` has just entered holds `sep` at its own level.
bool group_has(Lexer probe, Tok sep) {
  int depth = 0;
  for (Token t = probe.next(); t.kind != Tok::kEnd && t.kind != Tok::kError; t = probe.next()) {
    if (depth == 0 && t.kind == sep) return true;
    if (is_opener(t.kind)) ++depth;
    if (is_closer(t.kind) && --depth < 0) return false;
  }
  return false;
}

struct BinaryOp {
  Tok tok;
  Op op;
  int level;  // 0 binds loosest
};
constexpr BinaryOp kBinaryOps[] = {
    {Tok::kPlus, Op::kAdd, 0},          {Tok::kMinus, Op::kSub, 0},   {Tok::kStar, Op::kMul, 1},
    {Tok::kFloorDiv, Op::kFloorDiv, 1}, {Tok::kPercent, Op::kMod, 1},
};
constexpr int kUnaryLevel = 2;

const BinaryOp* binary_op(Tok kind) {
  for (const BinaryOp& b : kBinaryOps) {
    if (b.tok == kind) return &b;
  }
  return nullptr;
}

class NestingScope {
 public:
  explicit NestingScope(int& depth) : depth_(depth) { ++depth_; }
  ~NestingScope() { --depth_; }
  NestingScope(const NestingScope&) = delete;
  NestingScope& operator=(const NestingScope&) = delete;

 private:
  int& depth_;
};

// What the names in an expression may refer to.
enum class Names {
  kFree,  // stand-alone parse_expr: any variable, any load
  kDims,  // shapes, tile grids, wait counts: declared dims, no loads
  kEdge,  // edge maps: the map's variables or declared dims; loads of declared buffers
};

// Expressions and edge maps. Trees are built exactly as written, never simplified, so that
// parsing Expr::str() gives back the same tree.
class ExprParser {
 public:
  // `graph` holds the declarations so far; null outside a graph, where nothing is declared.
  ExprParser(TokenStream& ts, Names names, const Graph* graph) : ts_(ts), names_(names), graph_(graph) {}

  Expected<Expr> expression() { return binary(0); }
  Expected<EdgeMap> edge_map();

 private:
  Expected<Expr> binary(int level);
  Expected<Expr> unary();
  Expected<Expr> atom();
  Expected<Expr> call(const Token& name);
  Expected<std::vector<Expr>> index(bool slices);
  Status resolve_var(const Token& name) const;
  Status resolve_load(const Token& name) const;

  Expected<std::vector<std::string>> edge_vars();
  Expected<Coord> coord();
  Status range(EdgeMap& m);
  bool tuple_ahead() const;
  bool gather_ahead() const;

  TokenStream& ts_;
  Names names_;
  const Graph* graph_;
  std::vector<std::string> vars_;  // kEdge: the map's variables
  int nesting_ = 0;
  int operators_ = 0;
};

Expected<Expr> ExprParser::binary(int level) {
  auto operand = [&] { return level + 1 == kUnaryLevel ? unary() : binary(level + 1); };
  EVT_ASSIGN_OR_RETURN(Expr lhs, operand());
  for (const BinaryOp* op = binary_op(ts_.cur().kind); op && op->level == level; op = binary_op(ts_.cur().kind)) {
    if (++operators_ > kMaxOperators) {
      return ts_.error_at(ts_.cur().pos, fmt::format("expression has more than {} operators", kMaxOperators));
    }
    ts_.take();
    EVT_ASSIGN_OR_RETURN(Expr rhs, operand());
    lhs = Expr::binary(op->op, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

// Every recursion of the expression grammar passes through here, so the nesting guard does too.
Expected<Expr> ExprParser::unary() {
  if (nesting_ >= kMaxNesting) {
    return ts_.error_at(ts_.cur().pos, fmt::format("expression nested more than {} levels deep", kMaxNesting));
  }
  NestingScope scope(nesting_);
  if (!ts_.accept(Tok::kMinus)) return atom();
  // `-3` is the constant -3, which is how Expr::str prints negative constants; `-x` is -1*x.
  if (ts_.at(Tok::kInt)) return Expr(-ts_.take().value);
  EVT_ASSIGN_OR_RETURN(Expr operand, unary());
  return Expr(-1) * operand;
}

Expected<Expr> ExprParser::atom() {
  switch (ts_.cur().kind) {
    case Tok::kInt: return Expr(ts_.take().value);
    case Tok::kLParen: {
      const Token open = ts_.take();
      EVT_ASSIGN_OR_RETURN(Expr e, expression());
      EVT_RETURN_IF_ERROR(ts_.close(open, "')'"));
      return e;
    }
    case Tok::kIdent: {
      const Token name = ts_.take();
      if (ts_.at(Tok::kLParen)) return call(name);
      if (ts_.at(Tok::kLBracket)) {
        EVT_RETURN_IF_ERROR(resolve_load(name));
        EVT_ASSIGN_OR_RETURN(std::vector<Expr> idx, index(/*slices=*/false));
        return Expr::load(std::string(name.text), std::move(idx));
      }
      EVT_RETURN_IF_ERROR(resolve_var(name));
      return Expr::var(std::string(name.text));
    }
    case Tok::kColon:
      if (names_ != Names::kDims) {
        return ts_.error_at(ts_.cur().pos,
                            "':' (a whole dimension) is only allowed as a coordinate of its own or as an index "
                            "of a gather like 'topk[i, :]'");
      }
      return ts_.unexpected("an expression");
    default: return ts_.unexpected("an expression");
  }
}

Expected<Expr> ExprParser::call(const Token& name) {
  if (name.text != "min" && name.text != "max") {
    return ts_.error_at(name.pos, fmt::format("unknown function '{}' (expected min or max)", name.text));
  }
  const Token open = ts_.take();
  EVT_ASSIGN_OR_RETURN(Expr a, expression());
  EVT_RETURN_IF_ERROR(ts_.expect(Tok::kComma, fmt::format("',' and a second argument of {}", name.text)));
  EVT_ASSIGN_OR_RETURN(Expr b, expression());
  EVT_RETURN_IF_ERROR(ts_.close(open, "')'"));
  return name.text == "min" ? min(a, b) : max(a, b);
}

// The index of a load, from its '['. With `slices`, a ':' entry becomes a null Expr.
Expected<std::vector<Expr>> ExprParser::index(bool slices) {
  return ts_.list<Expr>(Tok::kLBracket, "'['", [&]() -> Expected<Expr> {
    if (slices && ts_.accept(Tok::kColon)) return Expr();
    return expression();
  });
}

Status ExprParser::resolve_var(const Token& name) const {
  const std::string n(name.text);
  switch (names_) {
    case Names::kFree: return Status();
    case Names::kDims:
      if (graph_ && graph_->has_dim(n)) return Status();
      return ts_.error_at(name.pos, fmt::format("unknown dimension '{}'", n));
    case Names::kEdge:
      if (std::find(vars_.begin(), vars_.end(), n) != vars_.end() || (graph_ && graph_->has_dim(n))) return Status();
      return ts_.error_at(name.pos, fmt::format("unknown variable '{}'", n));
  }
  return Status();
}

Status ExprParser::resolve_load(const Token& name) const {
  const std::string n(name.text);
  switch (names_) {
    case Names::kFree: return Status();
    case Names::kDims:
      return ts_.error_at(name.pos, fmt::format("'{}[...]' reads an index buffer, which only edge maps may do", n));
    case Names::kEdge:
      if (!graph_ || graph_->find_buffer(n)) return Status();
      return ts_.error_at(name.pos, fmt::format("unknown buffer '{}'", n));
  }
  return Status();
}

// Edge-map grammar (edge_map.h):
//   edge   := vars '->' ( '[' expr ',' expr ')' | '(' coord (',' coord)* [','] ')' | coord )
//   vars   := LETTERS | '(' NAME (',' NAME)* [','] ')'
//   coord  := ':' | NAME '[' (':' | expr) (',' (':' | expr))* ']' | expr
Expected<EdgeMap> ExprParser::edge_map() {
  EdgeMap m;
  EVT_ASSIGN_OR_RETURN(m.vars, edge_vars());
  vars_ = m.vars;
  EVT_RETURN_IF_ERROR(ts_.expect(Tok::kArrow));
  if (ts_.at(Tok::kLBracket)) {
    m.kind = EdgeMap::Kind::kRangeTrigger;
    EVT_RETURN_IF_ERROR(range(m));
  } else if (ts_.at(Tok::kLParen) && tuple_ahead()) {
    EVT_ASSIGN_OR_RETURN(m.coords, ts_.list<Coord>(Tok::kLParen, "'('", [&] { return coord(); }));
  } else {
    EVT_ASSIGN_OR_RETURN(Coord c, coord());
    m.coords.push_back(std::move(c));
  }
  if (!ts_.at(Tok::kEnd)) return ts_.unexpected("the end of the edge map");
  return m;
}

// `ij` names the variables i and j, one letter each; `(t, k)` names t and k.
Expected<std::vector<std::string>> ExprParser::edge_vars() {
  std::vector<std::string> vars;
  auto add = [&](std::string name, SourcePos pos) -> Status {
    if (std::find(vars.begin(), vars.end(), name) != vars.end()) {
      return ts_.error_at(pos, fmt::format("duplicate variable '{}'", name));
    }
    vars.push_back(std::move(name));
    return Status();
  };
  if (ts_.at(Tok::kLParen)) {
    EVT_ASSIGN_OR_RETURN(std::vector<Token> names, ts_.list<Token>(Tok::kLParen, "'('", [&] {
      return ts_.expect_token(Tok::kIdent, "a variable name");
    }));
    for (const Token& name : names) {
      // EdgeMap::str writes one-character variables in the letters form, which takes letters only.
      if (name.text.size() == 1 && !is_letter(name.text[0])) {
        return ts_.error_at(name.pos, fmt::format("variable '{}' is not a letter", name.text));
      }
      EVT_RETURN_IF_ERROR(add(std::string(name.text), name.pos));
    }
    return vars;
  }
  EVT_ASSIGN_OR_RETURN(const Token letters,
                       ts_.expect_token(Tok::kIdent, "the map's variables, like 'ij' or '(t, k)'"));
  for (size_t i = 0; i < letters.text.size(); ++i) {
    const char c = letters.text[i];
    if (!is_letter(c)) {
      return ts_.error_at(shifted(letters.pos, i),
                          fmt::format("'{}' is not a letter: in '{}' each letter is a variable; write longer "
                                      "names in parentheses, like '(t, k)'",
                                      c, letters.text));
    }
    EVT_RETURN_IF_ERROR(add(std::string(1, c), shifted(letters.pos, i)));
  }
  return vars;
}

Expected<Coord> ExprParser::coord() {
  if (ts_.accept(Tok::kColon)) return Coord::slice();
  if (!gather_ahead()) {
    EVT_ASSIGN_OR_RETURN(Expr e, expression());
    return Coord::scalar(std::move(e));
  }
  const Token name = ts_.take();
  EVT_RETURN_IF_ERROR(resolve_load(name));
  EVT_ASSIGN_OR_RETURN(std::vector<Expr> idx, index(/*slices=*/true));
  if (binary_op(ts_.cur().kind)) {
    return ts_.error_at(ts_.cur().pos, fmt::format("'{}[...]' with ':' stands for many coordinates and cannot "
                                                   "take part in arithmetic",
                                                   name.text));
  }
  return Coord::gather(std::string(name.text), std::move(idx));
}

// `[lo, hi)`: the half-open range of consumer tasks that an event element releases.
Status ExprParser::range(EdgeMap& m) {
  ts_.take();
  EVT_ASSIGN_OR_RETURN(m.range_begin, expression());
  EVT_RETURN_IF_ERROR(ts_.expect(Tok::kComma));
  EVT_ASSIGN_OR_RETURN(m.range_end, expression());
  if (ts_.at(Tok::kRBracket)) {
    return ts_.error_at(ts_.cur().pos, "a range trigger is half-open and ends with ')', as in '[lo, hi)'");
  }
  return ts_.expect(Tok::kRParen);
}

// At '(': a tuple of coordinates `(i, j+1)` or `()`, not a parenthesized expression `(i+1)//2`.
bool ExprParser::tuple_ahead() const {
  const Lexer probe = ts_.lookahead();
  if (Lexer first = probe; first.next().kind == Tok::kRParen) return true;
  return group_has(probe, Tok::kComma);
}

// At a name: a gather `topk[i, :]`, whose index holds ':' (an ordinary load does not).
bool ExprParser::gather_ahead() const {
  Lexer probe = ts_.lookahead();
  return ts_.at(Tok::kIdent) && probe.next().kind == Tok::kLBracket && group_has(probe, Tok::kColon);
}

std::string dtype_list() {
  std::string s;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  }
  return s;
}

template <typename T>
Status assign_to(T& out, Expected<T> value) {
  if (!value.ok()) return value.status();
  out = std::move(value).value();
  return Status();
}

// Statements, one a line:
//   graph NAME
//   NAME = dim()
//   NAME = buffer(SHAPE, DTYPE)
//   NAME = event(SHAPE [, wait_count=(EXPR | runtime)])
//   NAME = call_device(FUNCTION, tiles=SHAPE [, reads=(..)] [, writes=(..)] [, in_edges={..}]
//                      [, out_edges={..}] [, sets=(..)] [, schedule=static|dynamic]
//                      [, layered=true|false])
class GraphParser {
 public:
  explicit GraphParser(const SourceText& src) : src_(src), ts_(src, src.text(), SourcePos{}, Lexer::Mode::kGraph) {}
  Expected<Graph> parse();

 private:
  // The part of a declaration before its arguments: `NAME = KIND(`.
  struct Head {
    Token name, kind, open;
  };
  enum class Ref { kBuffer, kEvent };

  Status statement(bool first);
  Status declaration(const Token& name);
  Status declare(const Token& name, std::string_view noun);
  Status dim(const Head& h);
  Status buffer(const Head& h);
  Status event(const Head& h);
  Status call_device(const Head& h);
  Status call_keyword(const Token& key, TaskGroup& group);
  Expected<WaitCount> wait_count();
  Expected<Expr> dims_expr() { return ExprParser(ts_, Names::kDims, &g_).expression(); }
  Expected<std::vector<Expr>> shape();
  Expected<Token> reference(Ref ref);
  Expected<std::vector<std::string>> references(Ref ref);
  Expected<std::vector<Edge>> edges(std::string_view keyword);
  Expected<EdgeMap> edge_map(const Token& text);

  struct Declared {
    std::string_view noun;  // "a buffer"
    int line;
  };

  const SourceText& src_;
  TokenStream ts_;
  Graph g_;
  std::map<std::string, Declared> declared_;  // dims, buffers, events and groups share one namespace
};

Expected<Graph> GraphParser::parse() {
  for (bool first = true;; first = false) {
    while (ts_.accept(Tok::kNewline)) continue;  // blank and comment-only lines
    if (ts_.at(Tok::kEnd)) return std::move(g_);
    EVT_RETURN_IF_ERROR(statement(first));
  }
}

Status GraphParser::statement(bool first) {
  EVT_ASSIGN_OR_RETURN(const Token name, ts_.expect_token(Tok::kIdent, "a statement like 'B = dim()'"));
  // `graph` is a keyword only where a name follows, so it stays usable as a declared name.
  if (name.text == "graph" && ts_.at(Tok::kIdent)) {
    if (!first) return ts_.error_at(name.pos, "'graph NAME' must be the first statement");
    g_.name = ts_.take().text;
  } else {
    EVT_RETURN_IF_ERROR(declaration(name));
  }
  if (ts_.accept(Tok::kNewline) || ts_.at(Tok::kEnd)) return Status();
  return ts_.unexpected("end of line");
}

Status GraphParser::declaration(const Token& name) {
  struct Kind {
    std::string_view keyword, noun;
    Status (GraphParser::*parse)(const Head&);
  };
  static constexpr Kind kKinds[] = {
      {"dim", "a dimension", &GraphParser::dim},
      {"buffer", "a buffer", &GraphParser::buffer},
      {"event", "an event", &GraphParser::event},
      {"call_device", "a task group", &GraphParser::call_device},
  };
  EVT_RETURN_IF_ERROR(ts_.expect(Tok::kAssign));
  EVT_ASSIGN_OR_RETURN(const Token kind, ts_.expect_token(Tok::kIdent, "dim(), buffer(), event() or call_device()"));
  const Kind* k = std::find_if(std::begin(kKinds), std::end(kKinds),
                               [&](const Kind& candidate) { return candidate.keyword == kind.text; });
  if (k == std::end(kKinds)) {
    return ts_.error_at(
        kind.pos, fmt::format("unknown declaration '{}' (expected dim, buffer, event or call_device)", kind.text));
  }
  EVT_RETURN_IF_ERROR(declare(name, k->noun));
  EVT_ASSIGN_OR_RETURN(const Token open, ts_.expect_token(Tok::kLParen, "'('"));
  return (this->*k->parse)(Head{name, kind, open});
}

Status GraphParser::declare(const Token& name, std::string_view noun) {
  // `wait_count=runtime` would be ambiguous with a dim of that name.
  if (name.text == "runtime") return ts_.error_at(name.pos, "'runtime' is reserved (as in wait_count=runtime)");
  const auto [it, inserted] = declared_.try_emplace(std::string(name.text), Declared{noun, name.pos.line});
  if (inserted) return Status();
  return ts_.error_at(name.pos, fmt::format("duplicate name '{}': already declared as {} on line {}", name.text,
                                            it->second.noun, it->second.line));
}

Status GraphParser::dim(const Head& h) {
  EVT_RETURN_IF_ERROR(ts_.close(h.open, "')' (dim() takes no arguments)"));
  g_.dims.emplace_back(h.name.text);
  return Status();
}

Status GraphParser::buffer(const Head& h) {
  Buffer b;
  b.name = h.name.text;
  EVT_ASSIGN_OR_RETURN(b.shape, shape());
  EVT_RETURN_IF_ERROR(ts_.expect(Tok::kComma, "',' and a dtype"));
  EVT_ASSIGN_OR_RETURN(const Token dtype, ts_.expect_token(Tok::kIdent, fmt::format("a dtype ({})", dtype_list())));
  const std::optional<DType> t = parse_dtype(std::string(dtype.text));
  if (!t) {
    return ts_.error_at(dtype.pos, fmt::format("unknown dtype '{}' (expected one of {})", dtype.text, dtype_list()));
  }
  b.dtype = *t;
  ts_.accept(Tok::kComma);
  EVT_RETURN_IF_ERROR(ts_.close(h.open, "')'"));
  g_.buffers.push_back(std::move(b));
  return Status();
}

Status GraphParser::event(const Head& h) {
  Event e;
  e.name = h.name.text;
  EVT_ASSIGN_OR_RETURN(e.shape, shape());
  bool have_wait = false;
  while (ts_.accept(Tok::kComma) && !ts_.at(Tok::kRParen)) {
    EVT_ASSIGN_OR_RETURN(const Token key, ts_.expect_token(Tok::kIdent, "wait_count="));
    if (key.text != "wait_count") {
      return ts_.error_at(key.pos, fmt::format("event: unknown keyword '{}' (expected wait_count=)", key.text));
    }
    if (have_wait) return ts_.error_at(key.pos, "event: duplicate keyword 'wait_count='");
    have_wait = true;
    EVT_RETURN_IF_ERROR(ts_.expect(Tok::kAssign));
    EVT_ASSIGN_OR_RETURN(e.wait, wait_count());
  }
  EVT_RETURN_IF_ERROR(ts_.close(h.open, "',' or ')'"));
  g_.events.push_back(std::move(e));
  return Status();
}

Expected<WaitCount> GraphParser::wait_count() {
  if (ts_.at(Tok::kIdent) && ts_.cur().text == "runtime") {
    ts_.take();
    return WaitCount{WaitCount::Kind::kRuntime, Expr()};
  }
  EVT_ASSIGN_OR_RETURN(Expr count, dims_expr());
  return WaitCount{WaitCount::Kind::kExplicit, std::move(count)};
}

Status GraphParser::call_device(const Head& h) {
  TaskGroup group;
  group.name = h.name.text;
  EVT_ASSIGN_OR_RETURN(const Token function, ts_.expect_token(Tok::kIdent, "the tile function's name"));
  if (ts_.at(Tok::kAssign)) {
    return ts_.error_at(function.pos, fmt::format("call_device: the first argument is the tile function's name, "
                                                  "found keyword '{}='",
                                                  function.text));
  }
  group.function = function.text;
  std::set<std::string_view> seen;
  while (ts_.accept(Tok::kComma) && !ts_.at(Tok::kRParen)) {
    EVT_ASSIGN_OR_RETURN(const Token key, ts_.expect_token(Tok::kIdent, "a keyword argument like tiles="));
    if (!seen.insert(key.text).second) {
      return ts_.error_at(key.pos, fmt::format("call_device: duplicate keyword '{}='", key.text));
    }
    EVT_RETURN_IF_ERROR(call_keyword(key, group));
  }
  EVT_RETURN_IF_ERROR(ts_.close(h.open, "',' or ')'"));
  if (!seen.count("tiles")) return ts_.error_at(h.kind.pos, "call_device: missing tiles=");
  if (group.layered && group.tiles.empty()) {
    return ts_.error_at(h.kind.pos, "call_device: layered=true needs a tile grid, whose dim 0 is the layer");
  }
  g_.groups.push_back(std::move(group));
  return Status();
}

Status GraphParser::call_keyword(const Token& key, TaskGroup& group) {
  static constexpr std::string_view kKeywords[] = {"tiles", "reads",    "writes", "in_edges",
                                                    "out_edges", "sets", "schedule", "layered"};
  const std::string_view k = key.text;
  if (std::find(std::begin(kKeywords), std::end(kKeywords), k) == std::end(kKeywords)) {
    return ts_.error_at(key.pos, fmt::format("call_device: unknown keyword '{}' (expected tiles, reads, writes, "
                                             "in_edges, out_edges, sets, schedule or layered)",
                                             k));
  }
  EVT_RETURN_IF_ERROR(ts_.expect(Tok::kAssign));
  if (k == "tiles") return assign_to(group.tiles, shape());
  if (k == "reads") return assign_to(group.reads, references(Ref::kBuffer));
  if (k == "writes") return assign_to(group.writes, references(Ref::kBuffer));
  if (k == "in_edges") return assign_to(group.in_edges, edges(k));
  if (k == "out_edges") return assign_to(group.out_edges, edges(k));
  if (k == "schedule") {
    EVT_ASSIGN_OR_RETURN(const Token value, ts_.expect_token(Tok::kIdent, "static, dynamic or inline"));
    if (value.text != "static" && value.text != "dynamic" && value.text != "inline") {
      return ts_.error_at(value.pos,
                          fmt::format("call_device: schedule={} (expected static, dynamic or inline)", value.text));
    }
    group.schedule = value.text == "dynamic"  ? GroupSchedule::kDynamic
                     : value.text == "inline" ? GroupSchedule::kInline
                                              : GroupSchedule::kStatic;
    return Status();
  }
  if (k == "layered") {
    EVT_ASSIGN_OR_RETURN(const Token value, ts_.expect_token(Tok::kIdent, "true or false"));
    if (value.text != "true" && value.text != "false") {
      return ts_.error_at(value.pos, fmt::format("call_device: layered={} (expected true or false)", value.text));
    }
    group.layered = value.text == "true";
    return Status();
  }
  return assign_to(group.sets, references(Ref::kEvent));  // the one keyword left: sets
}

Expected<std::vector<Expr>> GraphParser::shape() {
  return ts_.list<Expr>(Tok::kLParen, "a tuple like (B, 4)", [&] { return dims_expr(); });
}

Expected<Token> GraphParser::reference(Ref ref) {
  const bool event = ref == Ref::kEvent;
  EVT_ASSIGN_OR_RETURN(Token name, ts_.expect_token(Tok::kIdent, event ? "an event name" : "a buffer name"));
  const std::string n(name.text);
  if (event ? g_.find_event(n) != nullptr : g_.find_buffer(n) != nullptr) return name;
  return ts_.error_at(name.pos, fmt::format("unknown {} '{}'", event ? "event" : "buffer", n));
}

Expected<std::vector<std::string>> GraphParser::references(Ref ref) {
  return ts_.list<std::string>(Tok::kLParen, "a tuple of names like (A,)", [&]() -> Expected<std::string> {
    EVT_ASSIGN_OR_RETURN(const Token name, reference(ref));
    return std::string(name.text);
  });
}

Expected<std::vector<Edge>> GraphParser::edges(std::string_view keyword) {
  std::set<std::string_view> seen;
  return ts_.list<Edge>(Tok::kLBrace, "a dict like {E: \"ij->i\"}", [&]() -> Expected<Edge> {
    EVT_ASSIGN_OR_RETURN(const Token event, reference(Ref::kEvent));
    if (!seen.insert(event.text).second) {
      return ts_.error_at(event.pos, fmt::format("duplicate event '{}' in {}=", event.text, keyword));
    }
    EVT_RETURN_IF_ERROR(ts_.expect(Tok::kColon));
    EVT_ASSIGN_OR_RETURN(const Token text, ts_.expect_token(Tok::kString, "an edge map like \"ij->i\""));
    EVT_ASSIGN_OR_RETURN(EdgeMap map, edge_map(text));
    return Edge{std::string(event.text), std::move(map)};
  });
}

// The string's contents start one byte after its opening quote, on the same line.
Expected<EdgeMap> GraphParser::edge_map(const Token& text) {
  TokenStream sub(src_, text.text, shifted(text.pos, 1), Lexer::Mode::kInline,
                  fmt::format("edge map \"{}\": ", text.text));
  return ExprParser(sub, Names::kEdge, &g_).edge_map();
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

Expected<Graph> parse_graph(std::string_view text, std::string_view filename) {
  const SourceText src(text, filename);
  return GraphParser(src).parse();
}

Expected<Graph> load_graph_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return error("cannot open graph file '{}': {}", path, std::strerror(errno));
  std::string text;
  char chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, file.get())) > 0;) text.append(chunk, n);
  if (std::ferror(file.get())) return error("cannot read graph file '{}': {}", path, std::strerror(errno));
  return parse_graph(text, path);
}

Expected<Expr> parse_expr(std::string_view text) {
  const SourceText src(text, "<expr>");
  TokenStream ts(src, text, SourcePos{}, Lexer::Mode::kInline);
  EVT_ASSIGN_OR_RETURN(Expr e, ExprParser(ts, Names::kFree, nullptr).expression());
  if (!ts.at(Tok::kEnd)) return ts.unexpected("the end of the expression");
  return e;
}

// Outside a graph nothing is declared: the map may read any buffer, but its other names must
// be its own variables.
Expected<EdgeMap> parse_edge_map(std::string_view text) {
  const SourceText src(text, "<edge>");
  TokenStream ts(src, text, SourcePos{}, Lexer::Mode::kInline);
  return ExprParser(ts, Names::kEdge, nullptr).edge_map();
}

}  // namespace evt::ir
