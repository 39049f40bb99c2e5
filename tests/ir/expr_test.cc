#include "ir/expr.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "ir/text_form.h"

namespace evt::ir {

// gtest prints expressions in failure messages through PrintTo.
void PrintTo(const Expr& e, std::ostream* os) { *os << e.str(); }

namespace {

const Expr a = Expr::var("a"), b = Expr::var("b"), c = Expr::var("c");
const Expr B = Expr::var("B"), i = Expr::var("i"), j = Expr::var("j");

Expr parsed(std::string_view text) {
  Expected<Expr> e = parse_expr(text);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? *e : Expr();
}

// Evaluates with a=5, b=-3, c=7, B=4 and buf[k...] = sum of 3*k - 1.
Expected<int64_t> eval(const Expr& e) {
  const std::map<std::string, int64_t> values = {{"a", 5}, {"b", -3}, {"c", 7}, {"B", 4}};
  EvalEnv env;
  env.var = [&](const std::string& name) -> std::optional<int64_t> {
    auto it = values.find(name);
    return it == values.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  env.load = [](const std::string&, std::span<const int64_t> index) -> Expected<int64_t> {
    int64_t sum = 0;
    for (int64_t k : index) sum += 3 * k - 1;
    return sum;
  };
  return evaluate(e, env);
}

int64_t eval_ok(const Expr& e) {
  Expected<int64_t> v = eval(e);
  EXPECT_TRUE(v.ok()) << e.str() << ": " << v.status().message();
  return v.ok() ? *v : 0;
}

// A random tree over a, b, c, small constants (negative ones included) and loads of `buf`.
Expr random_expr(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  if (depth == 0 || pick(4) == 0) {
    if (pick(2) == 0) return Expr(static_cast<int64_t>(pick(9) - 4));
    return Expr::var(std::string(1, static_cast<char>('a' + pick(3))));
  }
  static constexpr Op kOps[] = {Op::kAdd, Op::kSub, Op::kMul, Op::kFloorDiv, Op::kMod, Op::kMin, Op::kMax, Op::kLoad};
  const Op op = kOps[pick(8)];
  if (op == Op::kLoad) {
    std::vector<Expr> index;
    for (int k = 0, n = 1 + pick(2); k < n; ++k) index.push_back(random_expr(rng, depth - 1));
    return Expr::load("buf", std::move(index));
  }
  return Expr::binary(op, random_expr(rng, depth - 1), random_expr(rng, depth - 1));
}

// ---------------------------------------------------------------------------------------------
// Printing and parsing

TEST(ExprPrint, UsesTheFewestParentheses) {
  const std::vector<std::pair<Expr, std::string>> cases = {
      {B * 32, "B*32"},
      {(a - b) - c, "a-b-c"},
      {a - (b - c), "a-(b-c)"},
      {a + (b + c), "a+(b+c)"},
      {a * (b + c), "a*(b+c)"},
      {(a + b) * c, "(a+b)*c"},
      {a * b + c, "a*b+c"},
      {floordiv(i + 1, 2), "(i+1)//2"},
      {floordiv(a * b, c), "a*b//c"},
      {a * floordiv(b, c), "a*(b//c)"},
      {floordiv(floordiv(a, b), c), "a//b//c"},
      {floordiv(a, floordiv(b, c)), "a//(b//c)"},
      {mod(a, b * c), "a%(b*c)"},
      {Expr(-3), "-3"},
      {a - Expr(-3), "a--3"},
      {a + Expr(-3), "a+-3"},
      {a * Expr(-1), "a*-1"},
      {Expr(-1) * a, "-1*a"},
      {Expr(-1) * (a + b), "-1*(a+b)"},
      {floordiv(Expr(-7), 2), "-7//2"},
      {min(a, b + 1), "min(a, b+1)"},
      {max(min(a, b), -2) * 2, "max(min(a, b), -2)*2"},
      {Expr::load("buf", {i, j + 1}), "buf[i, j+1]"},
      {Expr::load("indptr", {Expr::var("e") + 1}) - Expr::load("indptr", {Expr::var("e")}), "indptr[e+1]-indptr[e]"},
  };
  for (const auto& [e, text] : cases) {
    EXPECT_EQ(e.str(), text);
    EXPECT_EQ(parsed(text), e) << text;
  }
  EXPECT_EQ(Expr().str(), "<null>");
}

TEST(ExprParse, BuildsTheTreeAsWritten) {
  EXPECT_EQ(parsed("a - b - c"), (a - b) - c);
  EXPECT_EQ(parsed("a - (b - c)"), a - (b - c));
  EXPECT_EQ(parsed("2*3+4"), Expr(2) * 3 + 4);  // not folded
  EXPECT_EQ(parsed("a + b*c"), a + b * c);
  EXPECT_EQ(parsed("a*b%c"), mod(a * b, c));
  EXPECT_EQ(parsed("((a))"), a);
  EXPECT_EQ(parsed("-3"), Expr(-3));
  EXPECT_EQ(parsed("- 3"), Expr(-3));
  EXPECT_EQ(parsed("-a"), Expr(-1) * a);
  EXPECT_EQ(parsed("-(3)"), Expr(-1) * 3);
  EXPECT_EQ(parsed("--3"), Expr(-1) * Expr(-3));
  EXPECT_EQ(parsed("-a*b"), (Expr(-1) * a) * b);  // unary minus binds tighter than *
  EXPECT_EQ(parsed("a*-3"), a * Expr(-3));
  EXPECT_EQ(parsed("a--3"), a - Expr(-3));
  EXPECT_EQ(parsed("x // -2"), floordiv(Expr::var("x"), Expr(-2)));
  EXPECT_EQ(parsed("min(a, max(b, 0))"), min(a, max(b, 0)));
  EXPECT_EQ(parsed("buf[i, j + 1]"), Expr::load("buf", {i, j + 1}));
  EXPECT_EQ(parsed("buf[]"), Expr::load("buf", {}));
  EXPECT_EQ(parsed("9223372036854775807"), Expr(int64_t{9223372036854775807}));
}

TEST(ExprParse, RejectsMalformedText) {
  for (const char* text : {"", "a+", "(a", "a)", "min(a)", "min(a, b, c)", "foo(a)", "a / b", "a[:]", "a:b",
                           "9223372036854775808", "a b", "1 2", "#", "\"s\""}) {
    EXPECT_FALSE(parse_expr(text).ok()) << text;
  }
  Expected<Expr> deep = parse_expr(std::string(1000, '(') + "a" + std::string(1000, ')'));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested more than 200 levels"), std::string::npos);
}

TEST(ExprParse, RandomTreesRoundTripThroughStr) {
  std::mt19937 rng(42);
  for (int n = 0; n < 3000; ++n) {
    const Expr e = random_expr(rng, 5);
    EXPECT_EQ(parsed(e.str()), e) << e.str();
  }
}

// ---------------------------------------------------------------------------------------------
// Evaluation: // and % follow Python (floor division; the remainder takes the divisor's sign).

TEST(ExprEvaluate, FloorDivisionAndModuloFollowPython) {
  struct Case {
    int64_t x, y, div, mod;  // Python: x // y, x % y
  };
  for (const Case& t :
       {Case{7, 2, 3, 1}, Case{-7, 2, -4, 1}, Case{7, -2, -4, -1}, Case{-7, -2, 3, -1}, Case{6, 3, 2, 0},
        Case{-6, 3, -2, 0}, Case{0, -5, 0, 0}, Case{1, 5, 0, 1}, Case{-1, 5, -1, 4}}) {
    EXPECT_EQ(floor_div(t.x, t.y), t.div) << t.x << "//" << t.y;
    EXPECT_EQ(floor_mod(t.x, t.y), t.mod) << t.x << "%" << t.y;
    EXPECT_EQ(eval_ok(floordiv(Expr(t.x), Expr(t.y))), t.div);
    EXPECT_EQ(eval_ok(mod(Expr(t.x), Expr(t.y))), t.mod);
    // Constant folding agrees with evaluation.
    EXPECT_EQ(simplify(floordiv(Expr(t.x), Expr(t.y))), Expr(t.div));
    EXPECT_EQ(simplify(mod(Expr(t.x), Expr(t.y))), Expr(t.mod));
  }
}

TEST(ExprEvaluate, VariablesLoadsAndErrors) {
  EXPECT_EQ(eval_ok(a * 2 + b), 7);
  EXPECT_EQ(eval_ok(floordiv(b, 2)), -2);
  EXPECT_EQ(eval_ok(mod(b, 2)), 1);
  EXPECT_EQ(eval_ok(min(a, b)), -3);
  EXPECT_EQ(eval_ok(max(a, b)), 5);
  EXPECT_EQ(eval_ok(Expr::load("buf", {a, Expr(1)})), (3 * 5 - 1) + (3 * 1 - 1));

  Expected<int64_t> zero = eval(floordiv(a, b + 3));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("division by zero in 'a//(b+3)'"), std::string::npos);
  EXPECT_FALSE(eval(mod(a, Expr(0))).ok());

  Expected<int64_t> unbound = eval(a + Expr::var("zz"));
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.status().message().find("unbound variable 'zz'"), std::string::npos);

  Expected<int64_t> no_buffers = evaluate(Expr::load("idx", {Expr(0)}), EvalEnv{});
  ASSERT_FALSE(no_buffers.ok());
  EXPECT_NE(no_buffers.status().message().find("reads buffer 'idx'"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Simplification

TEST(ExprSimplify, CanonicalForms) {
  EXPECT_EQ(simplify(Expr(4) + Expr(32) * B), B * 32 + 4);
  EXPECT_EQ(simplify(Expr(-1) + B), B - 1);
  EXPECT_EQ(simplify(B * 32 - B * 32), Expr(0));
  EXPECT_EQ(simplify(Expr(2) * 3 + 4), Expr(10));
  EXPECT_EQ(simplify(floordiv(B * 4, 4)), B);
  EXPECT_EQ(simplify(floordiv(B * 4 + 8, 4)), B + 2);
  EXPECT_EQ(simplify(mod(B * 6, 3)), Expr(0));
  EXPECT_EQ(simplify(min(B, B)), B);
  EXPECT_EQ(simplify(max(Expr(3), Expr(-5))), Expr(3));
  EXPECT_EQ(simplify(min(b, a)), simplify(min(a, b)));
  EXPECT_EQ(simplify(Expr(0) - B), B * Expr(-1));
  // Not simplifiable: floor division by a divisor that does not divide every coefficient.
  EXPECT_EQ(simplify(floordiv(B + 1, 2)), floordiv(B + 1, 2));
  // Division by a constant zero stays, for evaluation to report.
  EXPECT_EQ(simplify(floordiv(Expr(3), Expr(0))), floordiv(Expr(3), Expr(0)));
}

TEST(ExprSimplify, ProvablyEqual) {
  EXPECT_TRUE(provably_equal((a + 1) * (a - 1), a * a - 1));
  EXPECT_TRUE(provably_equal(a * (b + c), c * a + b * a));
  EXPECT_TRUE(provably_equal(floordiv(B * 4, 4) * 32, B * 32));
  EXPECT_TRUE(provably_equal(min(a, b) + 1, 1 + min(b, a)));
  EXPECT_TRUE(provably_equal(Expr::load("buf", {i + 1}), Expr::load("buf", {1 + i})));
  EXPECT_FALSE(provably_equal(a, b));
  EXPECT_FALSE(provably_equal(floordiv(a, 2) * 2, a));
  EXPECT_EQ(constant_value((B + 2) - (B - 1)), 3);
  EXPECT_EQ(constant_value(B + 1), std::nullopt);
}

TEST(ExprSimplify, RandomTreesKeepTheirValue) {
  std::mt19937 rng(7);
  int compared = 0;
  for (int n = 0; n < 3000; ++n) {
    const Expr e = random_expr(rng, 4);
    const Expr s = simplify(e);
    EXPECT_EQ(simplify(s), s) << e.str();  // idempotent
    EXPECT_TRUE(provably_equal(e, s)) << e.str();
    Expected<int64_t> before = eval(e);
    if (!before.ok()) continue;  // division by zero: simplification may fold it away
    Expected<int64_t> after = eval(s);
    ASSERT_TRUE(after.ok()) << e.str() << " -> " << s.str() << ": " << after.status().message();
    EXPECT_EQ(*after, *before) << e.str() << " -> " << s.str();
    ++compared;
  }
  EXPECT_GT(compared, 2000);
}

// ---------------------------------------------------------------------------------------------
// Queries

TEST(ExprQueries, IsAffineIn) {
  const std::set<std::string> ij = {"i", "j"};
  EXPECT_TRUE(is_affine_in(i * 2 + j - 1, ij));
  EXPECT_TRUE(is_affine_in(B * i + j, ij));  // B is not a map variable: a coefficient
  EXPECT_TRUE(is_affine_in(i * (B + 1), ij));
  EXPECT_TRUE(is_affine_in(floordiv(i, 2), ij));  // quasi-affine
  EXPECT_TRUE(is_affine_in(mod(i + j, B), ij));
  EXPECT_TRUE(is_affine_in(min(B, 4) * i, ij));
  EXPECT_TRUE(is_affine_in(Expr(3), ij));
  EXPECT_FALSE(is_affine_in(i * j, ij));
  EXPECT_FALSE(is_affine_in(floordiv(B, i), ij));
  EXPECT_FALSE(is_affine_in(mod(i, j), ij));
  EXPECT_FALSE(is_affine_in(min(i, 3), ij));
  EXPECT_FALSE(is_affine_in(Expr::load("topk", {i}), ij));
  EXPECT_FALSE(is_affine_in(Expr::load("n", {Expr(0)}) * i, ij));  // data-dependent coefficient
}

TEST(ExprQueries, VariablesAndLoads) {
  const Expr e = Expr::load("indptr", {i + 1}) - Expr::load("off", {B}) + j;
  std::set<std::string> vars, loads;
  collect_vars(e, vars);
  collect_loads(e, loads);
  EXPECT_EQ(vars, (std::set<std::string>{"B", "i", "j"}));
  EXPECT_EQ(loads, (std::set<std::string>{"indptr", "off"}));
  EXPECT_FALSE(is_data_independent(e));
  EXPECT_TRUE(is_data_independent(i * B + 1));
}

TEST(ExprQueries, StructuralEqualityAndOrder) {
  EXPECT_EQ(a + b, a + b);
  EXPECT_NE(a + b, b + a);
  EXPECT_NE(Expr(1), Expr(2));
  EXPECT_NE(Expr(), Expr(0));
  EXPECT_EQ(Expr(), Expr());
  EXPECT_LT(Expr(), Expr(0));
  EXPECT_TRUE(Expr(1) < Expr(2));
}

// The codegen's test for ranges that abut (a table of prefix sums): begin(e + 1) is end(e).
TEST(ExprSubstitute, ReplacesAVariableInLoadIndicesToo) {
  const Expr l = Expr::var("l"), e = Expr::var("e");
  const Expr begin = l * 4 + Expr::load("ptr", {l, e}), end = l * 4 + Expr::load("ptr", {l, e + 1});
  EXPECT_TRUE(provably_equal(substitute(begin, "e", e + 1), end));
  EXPECT_FALSE(provably_equal(substitute(begin, "l", l + 1), end));
  EXPECT_EQ(substitute(Expr(7), "e", l), Expr(7));
}

}  // namespace
}  // namespace evt::ir
