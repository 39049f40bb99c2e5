#include "ir/expr.h"

#include <fmt/format.h>

#include <map>

#include "util/check.h"

namespace evt::ir {

struct Expr::Node {
  Op op;
  int64_t value = 0;
  std::string name;
  std::vector<Expr> args;
};

Expr::Expr(int64_t value) : node_(std::make_shared<const Node>(Node{Op::kConst, value, {}, {}})) {}

Expr Expr::var(std::string name) {
  return Expr(std::make_shared<const Node>(Node{Op::kVar, 0, std::move(name), {}}));
}

Expr Expr::load(std::string buffer, std::vector<Expr> index) {
  return Expr(std::make_shared<const Node>(Node{Op::kLoad, 0, std::move(buffer), std::move(index)}));
}

Expr Expr::binary(Op op, Expr lhs, Expr rhs) {
  EVT_CHECK(lhs.defined() && rhs.defined()) << "binary expression with a null operand";
  return Expr(std::make_shared<const Node>(Node{op, 0, {}, {std::move(lhs), std::move(rhs)}}));
}

Op Expr::op() const {
  EVT_CHECK(node_) << "null expression";
  return node_->op;
}
int64_t Expr::value() const {
  EVT_CHECK(is_const()) << "value() of a non-constant expression " << str();
  return node_->value;
}
const std::string& Expr::name() const {
  EVT_CHECK(node_ && (node_->op == Op::kVar || node_->op == Op::kLoad)) << "name() of " << str();
  return node_->name;
}
std::span<const Expr> Expr::args() const {
  EVT_CHECK(node_) << "null expression";
  return node_->args;
}

std::strong_ordering operator<=>(const Expr& a, const Expr& b) {
  if (a.node_ == b.node_) return std::strong_ordering::equal;
  if (!a.node_ || !b.node_) return a.node_ ? std::strong_ordering::greater : std::strong_ordering::less;
  if (auto c = a.node_->op <=> b.node_->op; c != 0) return c;
  if (auto c = a.node_->value <=> b.node_->value; c != 0) return c;
  if (auto c = a.node_->name <=> b.node_->name; c != 0) return c;
  if (auto c = a.node_->args.size() <=> b.node_->args.size(); c != 0) return c;
  for (size_t i = 0; i < a.node_->args.size(); ++i) {
    if (auto c = a.node_->args[i] <=> b.node_->args[i]; c != 0) return c;
  }
  return std::strong_ordering::equal;
}

bool operator==(const Expr& a, const Expr& b) { return (a <=> b) == 0; }

Expr operator+(const Expr& a, const Expr& b) { return Expr::binary(Op::kAdd, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return Expr::binary(Op::kSub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return Expr::binary(Op::kMul, a, b); }
Expr floordiv(const Expr& a, const Expr& b) { return Expr::binary(Op::kFloorDiv, a, b); }
Expr mod(const Expr& a, const Expr& b) { return Expr::binary(Op::kMod, a, b); }
Expr min(const Expr& a, const Expr& b) { return Expr::binary(Op::kMin, a, b); }
Expr max(const Expr& a, const Expr& b) { return Expr::binary(Op::kMax, a, b); }

// ---------------------------------------------------------------------------------------------
// Printing

namespace {

int precedence(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kSub: return 1;
    case Op::kMul:
    case Op::kFloorDiv:
    case Op::kMod: return 2;
    default: return 3;
  }
}

const char* infix(Op op) {
  switch (op) {
    case Op::kAdd: return "+";
    case Op::kSub: return "-";
    case Op::kMul: return "*";
    case Op::kFloorDiv: return "//";
    case Op::kMod: return "%";
    default: return nullptr;
  }
}

void print(const Expr& e, std::string& out) {
  switch (e.op()) {
    case Op::kConst: out += std::to_string(e.value()); return;
    case Op::kVar: out += e.name(); return;
    case Op::kMin:
    case Op::kMax:
      out += e.op() == Op::kMin ? "min(" : "max(";
      print(e.args()[0], out);
      out += ", ";
      print(e.args()[1], out);
      out += ")";
      return;
    case Op::kLoad:
      out += e.name();
      out += "[";
      for (size_t i = 0; i < e.args().size(); ++i) {
        if (i) out += ", ";
        print(e.args()[i], out);
      }
      out += "]";
      return;
    default: break;
  }
  // Binary infix, left-associative: the right operand needs parentheses at equal precedence.
  const int p = precedence(e.op());
  const Expr& lhs = e.args()[0];
  const Expr& rhs = e.args()[1];
  const bool lhs_parens = precedence(lhs.op()) < p;
  const bool rhs_parens = precedence(rhs.op()) <= p;
  if (lhs_parens) out += "(";
  print(lhs, out);
  if (lhs_parens) out += ")";
  out += infix(e.op());
  if (rhs_parens) out += "(";
  print(rhs, out);
  if (rhs_parens) out += ")";
}

}  // namespace

std::string Expr::str() const {
  if (!node_) return "<null>";
  std::string out;
  print(*this, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Canonical simplification: expressions become polynomials over atoms.

namespace {

using Monomial = std::vector<Expr>;            // sorted atoms, repeated for powers
using Poly = std::map<Monomial, int64_t>;      // monomial -> non-zero coefficient

void add_term(Poly& p, const Monomial& m, int64_t c) {
  if (c == 0) return;
  auto [it, inserted] = p.emplace(m, c);
  if (!inserted && (it->second += c) == 0) p.erase(it);
}

Poly poly_const(int64_t c) {
  Poly p;
  add_term(p, {}, c);
  return p;
}

Poly poly_atom(const Expr& atom) { return Poly{{Monomial{atom}, 1}}; }

Poly poly_add(const Poly& a, const Poly& b, int64_t sign) {
  Poly out = a;
  for (const auto& [m, c] : b) add_term(out, m, sign * c);
  return out;
}

Poly poly_mul(const Poly& a, const Poly& b) {
  Poly out;
  for (const auto& [ma, ca] : a) {
    for (const auto& [mb, cb] : b) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      add_term(out, m, ca * cb);
    }
  }
  return out;
}

std::optional<int64_t> poly_as_const(const Poly& p) {
  if (p.empty()) return 0;
  if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
  return std::nullopt;
}

bool all_coefficients_divisible(const Poly& p, int64_t d) {
  for (const auto& [m, c] : p) {
    if (c % d != 0) return false;
  }
  return true;
}

Expr term_expr(const Monomial& m, int64_t c) {
  if (m.empty()) return Expr(c);
  Expr e = m[0];
  for (size_t i = 1; i < m.size(); ++i) e = e * m[i];
  return c == 1 ? e : e * Expr(c);
}

// Monomials of higher degree first, the constant last: `B*32+4`, not `4+32*B`.
Expr poly_expr(const Poly& p) {
  if (p.empty()) return Expr(0);
  std::vector<std::pair<Monomial, int64_t>> terms(p.begin(), p.end());
  std::stable_sort(terms.begin(), terms.end(), [](const auto& a, const auto& b) {
    return a.first.size() > b.first.size();
  });
  // Start from a positive term when there is one, so `B-1` rather than `-1+B`.
  auto first = std::find_if(terms.begin(), terms.end(), [](const auto& t) { return t.second > 0; });
  if (first == terms.end()) first = terms.begin();
  std::rotate(terms.begin(), first, first + 1);
  Expr e = term_expr(terms[0].first, terms[0].second);
  for (size_t i = 1; i < terms.size(); ++i) {
    const auto& [m, c] = terms[i];
    e = c < 0 ? e - term_expr(m, -c) : e + term_expr(m, c);
  }
  return e;
}

Poly to_poly(const Expr& e);

Expr simplify_atom(const Expr& e) {
  switch (e.op()) {
    case Op::kFloorDiv:
    case Op::kMod: {
      Poly a = to_poly(e.args()[0]);
      Poly b = to_poly(e.args()[1]);
      auto ca = poly_as_const(a);
      auto cb = poly_as_const(b);
      const bool div = e.op() == Op::kFloorDiv;
      if (ca && cb && *cb != 0) return Expr(div ? floor_div(*ca, *cb) : floor_mod(*ca, *cb));
      if (cb && *cb > 0 && all_coefficients_divisible(a, *cb)) {
        if (!div) return Expr(0);
        Poly q;
        for (const auto& [m, c] : a) add_term(q, m, c / *cb);
        return poly_expr(q);
      }
      return Expr::binary(e.op(), poly_expr(a), poly_expr(b));
    }
    case Op::kMin:
    case Op::kMax: {
      Expr a = simplify(e.args()[0]);
      Expr b = simplify(e.args()[1]);
      if (a == b) return a;
      if (a.is_const() && b.is_const()) {
        return Expr(e.op() == Op::kMin ? std::min(a.value(), b.value()) : std::max(a.value(), b.value()));
      }
      if (b < a) std::swap(a, b);  // commutative: canonical argument order
      return Expr::binary(e.op(), a, b);
    }
    case Op::kLoad: {
      std::vector<Expr> index;
      for (const Expr& i : e.args()) index.push_back(simplify(i));
      return Expr::load(e.name(), std::move(index));
    }
    default: return e;
  }
}

Poly to_poly(const Expr& e) {
  switch (e.op()) {
    case Op::kConst: return poly_const(e.value());
    case Op::kVar: return poly_atom(e);
    case Op::kAdd: return poly_add(to_poly(e.args()[0]), to_poly(e.args()[1]), 1);
    case Op::kSub: return poly_add(to_poly(e.args()[0]), to_poly(e.args()[1]), -1);
    case Op::kMul: return poly_mul(to_poly(e.args()[0]), to_poly(e.args()[1]));
    default: {
      Expr atom = simplify_atom(e);
      if (atom.is_const()) return poly_const(atom.value());
      // An atom that simplified into a polynomial (e.g. (4*B)//4 -> B) is expanded again.
      if (atom.op() == Op::kAdd || atom.op() == Op::kSub || atom.op() == Op::kMul || atom.is_var()) {
        return to_poly(atom);
      }
      return poly_atom(atom);
    }
  }
}

}  // namespace

Expr simplify(const Expr& e) {
  EVT_CHECK(e.defined()) << "simplify of a null expression";
  return poly_expr(to_poly(e));
}

bool provably_equal(const Expr& a, const Expr& b) { return simplify(a - b) == Expr(0); }

std::optional<int64_t> constant_value(const Expr& e) {
  Expr s = simplify(e);
  if (s.is_const()) return s.value();
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Queries

Expr substitute(const Expr& e, const std::string& var, const Expr& value) {
  switch (e.op()) {
    case Op::kConst: return e;
    case Op::kVar: return e.name() == var ? value : e;
    case Op::kLoad: {
      std::vector<Expr> index;
      for (const Expr& i : e.args()) index.push_back(substitute(i, var, value));
      return Expr::load(e.name(), std::move(index));
    }
    default: return Expr::binary(e.op(), substitute(e.args()[0], var, value), substitute(e.args()[1], var, value));
  }
}

bool is_data_independent(const Expr& e) {
  std::set<std::string> loads;
  collect_loads(e, loads);
  return loads.empty();
}

namespace {
bool free_of(const Expr& e, const std::set<std::string>& vars) {
  std::set<std::string> used;
  collect_vars(e, used);
  for (const auto& v : used) {
    if (vars.count(v)) return false;
  }
  return is_data_independent(e);
}
}  // namespace

bool is_affine_in(const Expr& e, const std::set<std::string>& vars) {
  switch (e.op()) {
    case Op::kConst:
    case Op::kVar: return true;
    case Op::kAdd:
    case Op::kSub: return is_affine_in(e.args()[0], vars) && is_affine_in(e.args()[1], vars);
    case Op::kMul:
      return (free_of(e.args()[0], vars) && is_affine_in(e.args()[1], vars)) ||
             (free_of(e.args()[1], vars) && is_affine_in(e.args()[0], vars));
    // Quasi-affine: floor division and modulo by a factor free of the map's variables.
    case Op::kFloorDiv:
    case Op::kMod: return is_affine_in(e.args()[0], vars) && free_of(e.args()[1], vars);
    case Op::kMin:
    case Op::kMax: return free_of(e, vars);
    case Op::kLoad: return false;
  }
  return false;
}

void collect_vars(const Expr& e, std::set<std::string>& out) {
  if (e.op() == Op::kVar) out.insert(e.name());
  for (const Expr& a : e.args()) collect_vars(a, out);
}

void collect_loads(const Expr& e, std::set<std::string>& buffers) {
  if (e.op() == Op::kLoad) buffers.insert(e.name());
  for (const Expr& a : e.args()) collect_loads(a, buffers);
}

Expected<int64_t> evaluate(const Expr& e, const EvalEnv& env) {
  switch (e.op()) {
    case Op::kConst: return e.value();
    case Op::kVar: {
      std::optional<int64_t> v = env.var ? env.var(e.name()) : std::nullopt;
      if (!v) return error("unbound variable '{}'", e.name());
      return *v;
    }
    case Op::kLoad: {
      std::vector<int64_t> index;
      for (const Expr& i : e.args()) {
        EVT_ASSIGN_OR_RETURN(int64_t v, evaluate(i, env));
        index.push_back(v);
      }
      if (!env.load) return error("'{}' reads buffer '{}', which is not available here", e.str(), e.name());
      return env.load(e.name(), index);
    }
    default: break;
  }
  EVT_ASSIGN_OR_RETURN(int64_t a, evaluate(e.args()[0], env));
  EVT_ASSIGN_OR_RETURN(int64_t b, evaluate(e.args()[1], env));
  switch (e.op()) {
    case Op::kAdd: return a + b;
    case Op::kSub: return a - b;
    case Op::kMul: return a * b;
    case Op::kFloorDiv:
    case Op::kMod:
      if (b == 0) return error("division by zero in '{}'", e.str());
      return e.op() == Op::kFloorDiv ? floor_div(a, b) : floor_mod(a, b);
    case Op::kMin: return std::min(a, b);
    case Op::kMax: return std::max(a, b);
    default: break;
  }
  EVT_CHECK(false) << "unhandled op";
  return 0;
}

}  // namespace evt::ir
