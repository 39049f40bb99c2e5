#pragma once
// Symbolic integer expressions: the shapes, tile grids, wait counts and edge maps of an Event
// Tensor graph are built from these. An Expr is an immutable tree shared by value.
//
// Semantics follow Python: `//` is floor division and `%` takes the sign of the divisor, so
// index arithmetic means the same on the CPU, in generated code and in the text form.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace evt::ir {

enum class Op : uint8_t { kConst, kVar, kAdd, kSub, kMul, kFloorDiv, kMod, kMin, kMax, kLoad };

class Expr {
 public:
  // A null expression: used only for "absent" (e.g. a wait count still to be inferred).
  Expr() = default;
  Expr(int64_t value);  // NOLINT: constants convert implicitly, as in `B * 32`
  Expr(int value) : Expr(static_cast<int64_t>(value)) {}  // NOLINT

  static Expr var(std::string name);
  // A scalar element of an index buffer, e.g. indptr[e+1]: makes the expression data-dependent.
  static Expr load(std::string buffer, std::vector<Expr> index);
  static Expr binary(Op op, Expr lhs, Expr rhs);

  bool defined() const { return node_ != nullptr; }
  Op op() const;
  int64_t value() const;             // kConst only
  const std::string& name() const;   // kVar: the variable; kLoad: the buffer
  std::span<const Expr> args() const;

  bool is_const() const { return defined() && op() == Op::kConst; }
  bool is_var() const { return defined() && op() == Op::kVar; }

  // Structural equality and a total order (used for canonical forms and as map keys).
  friend bool operator==(const Expr& a, const Expr& b);
  friend std::strong_ordering operator<=>(const Expr& a, const Expr& b);

  // Text with the fewest parentheses that parse back to the same tree: `B*32`, `(i+1)//2`.
  std::string str() const;

 private:
  struct Node;
  explicit Expr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  std::shared_ptr<const Node> node_;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr floordiv(const Expr& a, const Expr& b);
Expr mod(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);

// Canonical form: a sum of monomials with integer coefficients over atoms (variables and the
// non-polynomial nodes //, %, min, max, loads), constants folded. Two expressions that simplify
// to the same tree are equal for every binding.
Expr simplify(const Expr& e);
bool provably_equal(const Expr& a, const Expr& b);
// `e` with every use of variable `var` (in load indices too) replaced by `value`.
Expr substitute(const Expr& e, const std::string& var, const Expr& value);
std::optional<int64_t> constant_value(const Expr& e);  // after simplification

// True when the expression reads no buffer: its value depends on variables alone.
bool is_data_independent(const Expr& e);
// True when the expression is affine in `vars` (loads excluded; products, // and % only with
// factors free of `vars`).
bool is_affine_in(const Expr& e, const std::set<std::string>& vars);
void collect_vars(const Expr& e, std::set<std::string>& out);
void collect_loads(const Expr& e, std::set<std::string>& buffers);

// Evaluation. `var` resolves a variable name; `load` reads an index buffer element. Either may
// be empty, which makes the corresponding node an error.
struct EvalEnv {
  std::function<std::optional<int64_t>(const std::string&)> var;
  std::function<Expected<int64_t>(const std::string& buffer, std::span<const int64_t> index)> load;
};
Expected<int64_t> evaluate(const Expr& e, const EvalEnv& env);

// Python-style integer division helpers shared by evaluation and generated code.
constexpr int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
constexpr int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

}  // namespace evt::ir
