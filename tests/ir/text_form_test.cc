#include "ir/text_form.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace evt::ir {

// gtest prints values of these types in failure messages through PrintTo.
void PrintTo(const Expr& e, std::ostream* os);  // in expr_test.cc, linked into the same binary
void PrintTo(const Graph& g, std::ostream* os) { *os << "\n" << print_graph(g); }
void PrintTo(const EdgeMap& m, std::ostream* os) { *os << m.str(); }

namespace {

namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(EVT_SOURCE_DIR) / "tests" / "ir" / "golden"; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every NAME.evt in the golden directory that has a NAME.expected.evt beside it.
std::vector<std::string> golden_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(golden_dir())) {
    const std::string file = entry.path().filename().string();
    if (file.ends_with(".evt") && !file.ends_with(".expected.evt")) names.push_back(file.substr(0, file.size() - 4));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Graph parse_ok(std::string_view text, std::string_view filename = "<test>") {
  Expected<Graph> g = parse_graph(text, filename);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : Graph{};
}

// ---------------------------------------------------------------------------------------------
// Golden files: NAME.evt parses and prints as NAME.expected.evt, byte for byte, which in turn
// parses to the same graph and prints as itself.

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, PrintsCanonicalFormAndRoundTrips) {
  const fs::path input = golden_dir() / (GetParam() + ".evt");
  const fs::path expected_path = golden_dir() / (GetParam() + ".expected.evt");
  ASSERT_TRUE(fs::exists(expected_path)) << expected_path;
  Expected<Graph> g = load_graph_file(input.string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string expected = read_text(expected_path);
  EXPECT_EQ(print_graph(*g), expected);

  const Graph again = parse_ok(expected, expected_path.string());
  EXPECT_EQ(again, *g);
  EXPECT_EQ(print_graph(again), expected);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, ::testing::ValuesIn(golden_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(Golden, CoversTheRequiredGraphs) {
  const std::vector<std::string> names = golden_names();
  for (const char* required : {"splitk", "moe_routed", "edge_forms", "layout", "header_only"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
}

// The golden graphs hold what the text says, not only something that prints back the same.
TEST(Golden, SplitKGraphContents) {
  Expected<Graph> g = load_graph_file((golden_dir() / "splitk.evt").string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->name, "splitk");
  EXPECT_EQ(g->dims, std::vector<std::string>{"B"});
  ASSERT_EQ(g->buffers.size(), 3u);
  EXPECT_EQ(g->buffers[0].name, "A");
  EXPECT_EQ(g->buffers[0].shape, (std::vector<Expr>{Expr::var("B") * 32, 128}));
  EXPECT_EQ(g->buffers[0].dtype, DType::kF32);
  ASSERT_EQ(g->events.size(), 1u);
  EXPECT_EQ(g->events[0].wait, (WaitCount{WaitCount::Kind::kExplicit, Expr(4)}));
  ASSERT_EQ(g->groups.size(), 2u);
  const TaskGroup& partial = g->groups[0];
  EXPECT_EQ(partial.name, "partial");
  EXPECT_EQ(partial.function, "partial_sum");
  EXPECT_EQ(partial.tiles, (std::vector<Expr>{Expr::var("B"), 4}));
  EXPECT_EQ(partial.reads, std::vector<std::string>{"A"});
  EXPECT_EQ(partial.writes, std::vector<std::string>{"P"});
  ASSERT_EQ(partial.out_edges.size(), 1u);
  EXPECT_EQ(partial.out_edges[0].event, "E");
  EXPECT_EQ(partial.out_edges[0].map.vars, (std::vector<std::string>{"i", "j"}));
  EXPECT_EQ(partial.out_edges[0].map.coords, std::vector<Coord>{Coord::scalar(Expr::var("i"))});
  EXPECT_TRUE(g->groups[1].out_edges.empty());
  EXPECT_EQ(g->groups[1].in_edges.size(), 1u);
}

TEST(Golden, MoeGraphContents) {
  Expected<Graph> g = load_graph_file((golden_dir() / "moe_routed.evt").string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  const Event* grouped = g->find_event("Grouped");
  ASSERT_NE(grouped, nullptr);
  EXPECT_EQ(grouped->wait, (WaitCount{WaitCount::Kind::kRuntime, Expr()}));
  EXPECT_EQ(g->find_event("Routed")->wait, WaitCount{});
  EXPECT_EQ(g->find_group("count")->sets, std::vector<std::string>{"Grouped"});

  const EdgeMap& notify = g->find_group("gather")->out_edges.at(0).map;
  EXPECT_EQ(notify.coords, std::vector<Coord>{Coord::gather("topk", {Expr::var("i"), Expr()})});

  const TaskGroup* expert = g->find_group("expert");
  ASSERT_EQ(expert->in_edges.size(), 2u);
  EXPECT_EQ(expert->in_edges[0].event, "Counted");  // dict order is kept
  const EdgeMap& trigger = expert->in_edges[1].map;
  EXPECT_EQ(trigger.kind, EdgeMap::Kind::kRangeTrigger);
  EXPECT_EQ(trigger.vars, std::vector<std::string>{"e"});
  const Expr e = Expr::var("e");
  EXPECT_EQ(trigger.range_begin, Expr::load("indptr", {e}));
  EXPECT_EQ(trigger.range_end, Expr::load("indptr", {e + 1}));
  EXPECT_EQ(expert->schedule, GroupSchedule::kDynamic);
  EXPECT_EQ(g->find_group("gather")->schedule, GroupSchedule::kStatic);
}

// ---------------------------------------------------------------------------------------------
// Errors: each names the file, line and column, shows the line and puts a caret under the column.

struct ErrorCase {
  std::string input;
  std::string message;  // a substring of the message
  int line, col;
};

// Decls on lines 1-5 that the cases below build on.
const std::string kDecls =
    "B = dim()\n"
    "A = buffer((B, 4), f32)\n"
    "idx = buffer((B,), i32)\n"
    "E = event((B,))\n"
    "G = event((B,), wait_count=runtime)\n";

std::string nested(int depth) { return std::string(depth, '(') + "B" + std::string(depth, ')'); }

std::string long_sum(int terms) {
  std::string s = "B";
  for (int i = 1; i < terms; ++i) s += "+B";
  return s;
}

const std::vector<ErrorCase>& error_cases() {
  static const std::vector<ErrorCase> cases = {
      // Names and declarations.
      {"B = dim()\nA = buffer((X, 4), f32)\n", "unknown dimension 'X'", 2, 13},
      {kDecls + "g = call_device(f, tiles=(B,), reads=(Z,))\n", "unknown buffer 'Z'", 6, 39},
      {kDecls + "g = call_device(f, tiles=(B,), writes=(A, E))\n", "unknown buffer 'E'", 6, 43},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={F: \"i->i\"})\n", "unknown event 'F'", 6, 43},
      {kDecls + "g = call_device(f, tiles=(B,), sets=(A,))\n", "unknown event 'A'", 6, 38},
      {"B = dim()\nC = dim()\nB = buffer((4,), f32)\n", "duplicate name 'B': already declared as a dimension on line 1",
       3, 1},
      {kDecls + "g = call_device(f, tiles=(B,))\nE = dim()\n",
       "duplicate name 'E': already declared as an event on line 4", 7, 1},
      {"B = dim()\nA = buffer((B,), f8)\n", "unknown dtype 'f8' (expected one of f32, bf16, f16, i32, i64)", 2, 18},
      {"B = dim()\nA = buffer((B,))\n", "expected ',' and a dtype, found ')'", 2, 16},
      {"B = dim()\nX = tensor((B,))\n", "unknown declaration 'tensor'", 2, 5},
      {"runtime = dim()\n", "'runtime' is reserved", 1, 1},
      {"B = dim()\ngraph g\n", "'graph NAME' must be the first statement", 2, 1},
      {"B = dim(B)\n", "expected ')' (dim() takes no arguments), found 'B'", 1, 9},
      // Keyword arguments.
      {kDecls + "g = call_device(f, tiles=(B,), foo=(A,))\n",
       "call_device: unknown keyword 'foo' (expected tiles, reads, writes, in_edges, out_edges, sets, schedule or layered)",
       6, 32},
      {kDecls + "g = call_device(f, tiles=(B,), schedule=eager)\n",
       "call_device: schedule=eager (expected static, dynamic or inline)", 6, 41},
      {kDecls + "g = call_device(f, tiles=(B,), layered=yes)\n", "call_device: layered=yes (expected true or false)", 6,
       40},
      {kDecls + "g = call_device(f, tiles=(), layered=true)\n",
       "call_device: layered=true needs a tile grid, whose dim 0 is the layer", 6, 5},
      {kDecls + "g = call_device(f, reads=(A,))\n", "call_device: missing tiles=", 6, 5},
      {kDecls + "g = call_device(f, tiles=(B,), tiles=(B,))\n", "call_device: duplicate keyword 'tiles='", 6, 32},
      {kDecls + "g = call_device(tiles=(B,))\n", "the first argument is the tile function's name", 6, 17},
      {kDecls + "g = call_device(f, tiles=(B,), in_edges={E: \"i->i\", E: \"i->i\"})\n",
       "duplicate event 'E' in in_edges=", 6, 53},
      {kDecls + "g = call_device(f, tiles=(B,), in_edges={E: i})\n", "expected an edge map like \"ij->i\", found 'i'",
       6, 45},
      {kDecls + "g = call_device(f, tiles=(B,), reads=A)\n", "expected a tuple of names like (A,), found 'A'", 6, 38},
      {"B = dim()\nE = event((B,), count=4)\n", "event: unknown keyword 'count' (expected wait_count=)", 2, 17},
      {"B = dim()\nE = event((B,), wait_count=C)\n", "unknown dimension 'C'", 2, 28},
      // Tokens.
      {kDecls + "g = call_device(f, tiles=(B,), in_edges={E: \"i->i})\n", "unterminated string", 6, 45},
      {"B = dim()\nA = buffer((B $ 4), f32)\n", "unexpected character '$'", 2, 15},
      {"B = dim()\nA = buffer((B / 4,), f32)\n", "integer division is written '//'", 2, 15},
      {"B = dim()\nA = buffer((99999999999999999999,), f32)\n", "integer literal '99999999999999999999' is too large",
       2, 13},
      {std::string("B = dim()\nA = buffer((B, \x01), f32)\n"), "unexpected byte 0x01", 2, 16},
      // Brackets.
      {"B = dim()\nA = buffer((B, 4), f32\n", "'(' is never closed", 2, 11},
      {"B = dim()\nA = buffer((B, 4), f32\nC = dim()\n", "expected ')' to close the '(' on line 2, found 'C'", 3, 1},
      {"B = dim()\nA = buffer((B, 4) f32)\n", "expected ',' and a dtype, found 'f32'", 2, 19},
      {"B = dim())\n", "expected end of line, found ')'", 1, 10},
      {"B = dim()\nA = buffer((B, 4]), f32)\n", "expected ',' or ')', found ']'", 2, 17},
      // Expressions.
      {"B = dim()\nA = buffer((B+,), f32)\n", "expected an expression, found ','", 2, 15},
      {"B = dim()\nA = buffer((foo(B),), f32)\n", "unknown function 'foo' (expected min or max)", 2, 13},
      {"B = dim()\nA = buffer((min(B),), f32)\n", "expected ',' and a second argument of min, found ')'", 2, 18},
      {kDecls + "X = buffer((idx[0],), f32)\n", "'idx[...]' reads an index buffer, which only edge maps may do", 6, 13},
      {"B = dim()\nA = buffer((" + nested(300) + ",), f32)\n", "expression nested more than 200 levels deep", 2,
       13 + 200},
      {"B = dim()\nA = buffer((" + long_sum(10002) + ",), f32)\n", "expression has more than 10000 operators", 2,
       13 + 2 * 10000 + 1},
      // Edge maps: the column points inside the string.
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"ij\"})\n",
       "edge map \"ij\": expected '->', found end of input", 6, 49},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i-i\"})\n", "expected '->', found '-'", 6, 48},
      {kDecls + "g = call_device(f, tiles=(B, 4), out_edges={E: \"ij->k\"})\n",
       "edge map \"ij->k\": unknown variable 'k'", 6, 53},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->i+:\"})\n",
       "':' (a whole dimension) is only allowed as a coordinate of its own", 6, 52},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->idx[i+:]\"})\n",
       "':' (a whole dimension) is only allowed", 6, 56},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->idx[i, :]+1\"})\n",
       "'idx[...]' with ':' stands for many coordinates", 6, 59},
      {kDecls + "g = call_device(f, tiles=(B, B), out_edges={E: \"ii->i\"})\n", "duplicate variable 'i'", 6, 50},
      {kDecls + "g = call_device(f, tiles=(B, B), out_edges={E: \"(t, t)->t\"})\n", "duplicate variable 't'", 6, 53},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i2->i\"})\n",
       "'2' is not a letter: in 'i2' each letter is a variable", 6, 48},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"(_)->0\"})\n", "variable '_' is not a letter", 6, 48},
      {kDecls + "g = call_device(f, tiles=(B,), in_edges={E: \"e->[e, e+1]\"})\n",
       "a range trigger is half-open and ends with ')'", 6, 56},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->ptr[i]\"})\n", "unknown buffer 'ptr'", 6, 50},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->(i, j)\"})\n", "unknown variable 'j'", 6, 54},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->(i, i\"})\n", "'(' is never closed", 6, 50},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->i # comment\"})\n", "unexpected character '#'", 6,
       52},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->(i, j) extra\"})\n", "unknown variable 'j'", 6, 54},
      {kDecls + "g = call_device(f, tiles=(B,), out_edges={E: \"i->i i\"})\n",
       "expected the end of the edge map, found 'i'", 6, 52},
  };
  return cases;
}

TEST(TextFormErrors, MessageNamesFileLineColumnAndShowsCaret) {
  for (const ErrorCase& c : error_cases()) {
    SCOPED_TRACE(c.input.size() < 400 ? c.input : c.input.substr(0, 400) + "...");
    Expected<Graph> g = parse_graph(c.input, "bad.evt");
    if (g.ok()) {
      ADD_FAILURE() << "parsed without error";
      continue;
    }
    const std::string msg = g.status().message();
    const std::string where = "bad.evt:" + std::to_string(c.line) + ":" + std::to_string(c.col) + ": error: ";
    EXPECT_EQ(msg.substr(0, where.size()), where) << msg;
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;

    // The second line is the offending source line, the third a caret under the column.
    std::istringstream lines(msg), source(c.input);
    std::string header, shown, caret, line;
    std::getline(lines, header);
    std::getline(lines, shown);
    std::getline(lines, caret);
    for (int i = 0; i < c.line; ++i) std::getline(source, line);
    EXPECT_EQ(shown, line);
    EXPECT_EQ(caret, std::string(c.col - 1, ' ') + "^");
  }
}

TEST(TextFormErrors, CaretKeepsTabsOfTheSourceLine) {
  Expected<Graph> g = parse_graph("B = dim()\n\tA = buffer((X,), f32)\n", "tabs.evt");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "tabs.evt:2:14: error: unknown dimension 'X'\n\tA = buffer((X,), f32)\n\t            ^");
}

TEST(TextFormErrors, CarriageReturnsAreBlanks) {
  const Graph g = parse_ok("graph crlf\r\nB = dim()\r\nA = buffer((B,), f32)\r\n");
  EXPECT_EQ(g.name, "crlf");
  EXPECT_EQ(g.buffers.size(), 1u);
  Expected<Graph> bad = parse_graph("B = dim()\r\nA = buffer((C,), f32)\r\n", "crlf.evt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "crlf.evt:2:13: error: unknown dimension 'C'\nA = buffer((C,), f32)\n            ^");
}

TEST(TextFormErrors, LoadGraphFileNamesTheFile) {
  Expected<Graph> missing = load_graph_file("/nonexistent/dir/graph.evt");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/dir/graph.evt"), std::string::npos);

  Expected<Graph> dir = load_graph_file(golden_dir().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find(golden_dir().string()), std::string::npos);
}

TEST(TextFormErrors, StandaloneFormsPointIntoTheirText) {
  Expected<EdgeMap> m = parse_edge_map("ij->k");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "<edge>:1:5: error: unknown variable 'k'\nij->k\n    ^");

  Expected<Expr> e = parse_expr("a+(b");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "<expr>:1:3: error: '(' is never closed\na+(b\n  ^");

  Expected<Expr> trailing = parse_expr("a b");
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.status().message().find("expected the end of the expression, found 'b'"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Stand-alone edge maps.

TEST(EdgeMapText, CanonicalStringsRoundTrip) {
  for (const char* text : {"ij->i",
                           "i->(i, :)",
                           "i->topk[i, :]",
                           "t->tile_expert[t]",
                           "e->[indptr[e], indptr[e+1])",
                           "i->i//2",
                           "ij->(i, j+1)",
                           "i->0",
                           "tk->(t, k)",
                           "i->:",
                           "ijk->(k, :, i*2+j)",
                           "()->()",
                           "i->()",
                           "i->(i+1)//2",
                           "i->((i+1)//2, i%2)",
                           "i->buf[:, i, :]",
                           "(row, col)->(min(row, col), max(row-1, 0))",
                           "i->-3",
                           "i->-1*i",
                           "i->(g[i, :], :, i--2)"}) {
    SCOPED_TRACE(text);
    Expected<EdgeMap> m = parse_edge_map(text);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ(m->str(), text);
    Expected<EdgeMap> again = parse_edge_map(m->str());
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(*again, *m);
  }
}

TEST(EdgeMapText, ParsesIntoTheDocumentedStructure) {
  const Expr i = Expr::var("i"), j = Expr::var("j");

  Expected<EdgeMap> tuple = parse_edge_map("ij->(i, j + 1)");
  ASSERT_TRUE(tuple.ok());
  EXPECT_EQ(tuple->kind, EdgeMap::Kind::kMap);
  EXPECT_EQ(tuple->coords, (std::vector<Coord>{Coord::scalar(i), Coord::scalar(j + 1)}));

  // A parenthesized single coordinate is an expression, not a one-element tuple.
  Expected<EdgeMap> paren = parse_edge_map("i->(i+1)//2");
  ASSERT_TRUE(paren.ok());
  EXPECT_EQ(paren->coords, std::vector<Coord>{Coord::scalar(floordiv(i + 1, 2))});

  // ...unless it has a comma.
  Expected<EdgeMap> one = parse_edge_map("(i,)->(i,)");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->vars, std::vector<std::string>{"i"});
  EXPECT_EQ(one->coords, std::vector<Coord>{Coord::scalar(i)});
  EXPECT_EQ(one->str(), "i->i");

  Expected<EdgeMap> slice = parse_edge_map("i->(i, :)");
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ(slice->coords, (std::vector<Coord>{Coord::scalar(i), Coord::slice()}));

  // A load with no ':' is an ordinary data-dependent scalar coordinate.
  Expected<EdgeMap> load = parse_edge_map("t->tile_expert[t]+1");
  ASSERT_TRUE(load.ok());
  EXPECT_EQ(load->coords, std::vector<Coord>{Coord::scalar(Expr::load("tile_expert", {Expr::var("t")}) + 1)});

  Expected<EdgeMap> gather = parse_edge_map("i->(topk[i, :], 0)");
  ASSERT_TRUE(gather.ok());
  EXPECT_EQ(gather->coords, (std::vector<Coord>{Coord::gather("topk", {i, Expr()}), Coord::scalar(0)}));

  Expected<EdgeMap> range = parse_edge_map("e->[ptr[e], ptr[e+1])");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->kind, EdgeMap::Kind::kRangeTrigger);
  EXPECT_TRUE(range->coords.empty());
  EXPECT_EQ(range->range_end, Expr::load("ptr", {Expr::var("e") + 1}));
}

TEST(EdgeMapText, StandaloneMapsMayReadAnyBufferButNameOnlyTheirVariables) {
  EXPECT_TRUE(parse_edge_map("i->anything[i, :]").ok());
  EXPECT_FALSE(parse_edge_map("i->(i, B)").ok());
}

// ---------------------------------------------------------------------------------------------
// Graphs built in C++ print and parse back to themselves.

Graph sample_graph() {
  const Expr B = Expr::var("B"), T = Expr::var("T");
  const Expr a = Expr::var("a"), b = Expr::var("b"), c = Expr::var("c");
  Graph g;
  g.name = "built";
  g.dims = {"B", "T", "a", "b", "c"};
  g.buffers = {
      {"x", {(a - b) - c, a - (b - c), a * (b + c)}, DType::kBF16},
      {"y", {Expr(-3), Expr(-1) * B, B - Expr(-2), floordiv(B, -2), mod(Expr(-7), T)}, DType::kF16},
      {"idx", {min(B, T), max(B * 2, T + 1)}, DType::kI64},
      {"s", {}, DType::kI32},
  };
  g.events = {
      {"E", {B, T}, {WaitCount::Kind::kExplicit, B * 4 - 1}},
      {"F", {T}, {WaitCount::Kind::kRuntime, Expr()}},
      {"G", {}, {}},
  };
  const Expr i = Expr::var("i"), j = Expr::var("j");
  EdgeMap ij_to_ij{EdgeMap::Kind::kMap, {"i", "j"}, {Coord::scalar(i), Coord::scalar(floordiv(j - 1, 2))}, {}, {}};
  EdgeMap gather{EdgeMap::Kind::kMap, {"i", "j"}, {Coord::gather("idx", {Expr(), i + j}), Coord::slice()}, {}, {}};
  EdgeMap range{EdgeMap::Kind::kRangeTrigger,
                {"row"},
                {},
                Expr::load("idx", {Expr::var("row"), Expr(0)}),
                Expr::load("idx", {Expr::var("row") + 1, Expr(0)})};
  EdgeMap scalar{EdgeMap::Kind::kMap, {"tile", "k"}, {}, {}, {}};
  g.groups = {
      {"first", "f", {B, T}, {"x"}, {"y", "s"}, {}, {{"E", ij_to_ij}, {"F", gather}}, {"F"}},
      {"second", "g", {B * T}, {}, {}, {{"F", range}, {"E", ij_to_ij}}, {{"G", scalar}}, {}},
  };
  return g;
}

TEST(TextFormRoundTrip, BuiltGraphsParseBackEqual) {
  const Graph g = sample_graph();
  const std::string text = print_graph(g);
  const Graph again = parse_ok(text);
  EXPECT_EQ(again, g) << text;
  EXPECT_EQ(print_graph(again), text);
  // The trees the operators built print with as few parentheses as reparse to them.
  EXPECT_NE(text.find("x = buffer((a-b-c, a-(b-c), a*(b+c)), bf16)"), std::string::npos) << text;
  EXPECT_NE(text.find("y = buffer((-3, -1*B, B--2, B//-2, -7%T), f16)"), std::string::npos) << text;
  EXPECT_NE(text.find("s = buffer((), i32)"), std::string::npos) << text;
}

TEST(TextFormRoundTrip, EmptyGraphPrintsNothing) {
  EXPECT_EQ(print_graph(Graph{}), "");
  EXPECT_EQ(parse_ok(""), Graph{});
  EXPECT_EQ(parse_ok("# just a comment\n\n"), Graph{});
}

// The text form has no spelling for "inferred, and found to be N": such a count prints as an
// explicit one and reads back as kExplicit.
TEST(TextFormRoundTrip, InferredCountReadsBackExplicit) {
  Graph g;
  g.dims = {"B"};
  g.events = {{"E", {Expr::var("B")}, {WaitCount::Kind::kInferred, Expr(4)}}};
  const std::string text = print_graph(g);
  EXPECT_EQ(text, "B = dim()\nE = event((B,), wait_count=4)\n");
  EXPECT_EQ(parse_ok(text).events[0].wait, (WaitCount{WaitCount::Kind::kExplicit, Expr(4)}));
}

TEST(TextFormRoundTrip, LongCallsWrapUnderTheFirstArgument) {
  Graph g = sample_graph();
  for (int k = 0; k < 6; ++k) g.groups[0].reads.push_back("x");
  const std::string text = print_graph(g);
  std::istringstream lines(text);
  int continuation = 0;
  size_t first_argument = 0;  // column of the first argument of the statement being continued
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;
    if (!line.starts_with(" ")) {
      first_argument = line.find('(') + 1;
      continue;
    }
    ++continuation;
    EXPECT_EQ(line.find_first_not_of(' '), first_argument) << line;
  }
  EXPECT_GT(continuation, 0) << text;
  EXPECT_EQ(parse_ok(text), g);
}

// ---------------------------------------------------------------------------------------------
// Fuzz: mutated golden inputs never crash the parser, and what parses prints and parses back.

std::string mutate(std::string text, std::mt19937& rng) {
  static const std::string kPunctuation = "()[]{},:=+-*/%#\"'\n ->_x0";
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const int edits = 1 + static_cast<int>(pick(3));
  for (int e = 0; e < edits; ++e) {
    const size_t at = pick(text.size() + 1);
    switch (pick(4)) {
      case 0:  // flip bits of a byte
        if (at < text.size()) text[at] = static_cast<char>(text[at] ^ (1 << pick(8)));
        break;
      case 1: text.resize(at); break;
      case 2: text.insert(at, 1, kPunctuation[pick(kPunctuation.size())]); break;
      default:
        if (at < text.size()) text.erase(at, 1 + pick(8));
        break;
    }
    if (text.empty()) break;
  }
  return text;
}

TEST(TextFormFuzz, MutatedInputsFailCleanly) {
  std::vector<std::string> inputs;
  for (const std::string& name : golden_names()) inputs.push_back(read_text(golden_dir() / (name + ".evt")));
  ASSERT_FALSE(inputs.empty());
  std::mt19937 rng(20240601);
  int parsed = 0;
  for (int n = 0; n < 2000; ++n) {
    const std::string text = mutate(inputs[n % inputs.size()], rng);
    Expected<Graph> g = parse_graph(text, "fuzz.evt");
    if (!g.ok()) {
      EXPECT_EQ(g.status().message().rfind("fuzz.evt:", 0), 0u) << g.status().message();
      continue;
    }
    ++parsed;
    const Graph again = parse_ok(print_graph(*g));
    EXPECT_EQ(again, *g) << text;
  }
  EXPECT_GT(parsed, 0);
}

TEST(TextFormFuzz, RandomBytesFailCleanly) {
  std::mt19937 rng(7);
  for (int n = 0; n < 500; ++n) {
    std::string text(std::uniform_int_distribution<size_t>(0, 200)(rng), '\0');
    for (char& c : text) c = static_cast<char>(rng());
    Expected<Graph> g = parse_graph(text, "bytes.evt");
    if (!g.ok()) {
      EXPECT_EQ(g.status().message().rfind("bytes.evt:", 0), 0u);
    }
    (void)parse_edge_map(text);
    (void)parse_expr(text);
  }
}

}  // namespace
}  // namespace evt::ir
