// The CEL evaluator, table-driven: values, errors, compile checks and cost estimates.
#include "sim/cel/cel.h"

#include <gtest/gtest.h>

namespace gg::cel {
namespace {

using json = nlohmann::json;

const std::map<std::string, json>& Vars() {
  static const std::map<std::string, json> v = {
      {"m", {{"a", "1"}, {"for", 5}, {"x-y", true}}},
      {"l", {1, 2, 3}},
      {"s", "Hello, World"},
      {"self", {{"window", "1h"}, {"for", "5m"}, {"codes", {48, 79}}, {"ignore", {13}}}},
  };
  return v;
}

struct EvalCase {
  const char* expr;
  json want;
};

TEST(Cel, EvaluatesLikeCel) {
  const EvalCase cases[] = {
      {"1 + 2 * 3 - 4 / 2 % 3", 5},
      {"-7 / 2", -3},
      {"-7 % 2", -1},
      {"2.5 * 2.0", 5.0},
      {"1 == 1.0", true},
      {"'ab' + 'c' == 'abc'", true},
      {"[1, 2] + [3]", json::array({1, 2, 3})},
      {"{'a': 1, 'b': 2}.b", 2},
      {"size({'a': 1})", 1},
      {"'b' in {'a': 1, 'b': 2}", true},
      {"3 in l && !(4 in l)", true},
      {"l.exists_one(x, x > 2)", true},
      {"l.exists_one(x, x > 1)", false},
      {"l.map(x, x * 10)", json::array({10, 20, 30})},
      {"l.map(x, x > 1, x * 10)", json::array({20, 30})},
      {"l.filter(x, x % 2 == 1)", json::array({1, 3})},
      {"[true, false, true].filter(b, b).size() == 2", true},
      {"s.size() == 12 && size(s) == 12", true},
      {"s.startsWith('Hell') && s.endsWith('ld') && s.contains(', ')", true},
      {"s.matches('^H.*d$')", true},
      {"s.lowerAscii()", "hello, world"},
      {"s.upperAscii()", "HELLO, WORLD"},
      {"s.indexOf('o')", 4},
      {"s.lastIndexOf('o')", 8},
      {"s.substring(7)", "World"},
      {"s.substring(0, 5)", "Hello"},
      {"s.charAt(1)", "e"},
      {"s.replace('l', 'L')", "HeLLo, WorLd"},
      {"s.split(', ')", json::array({"Hello", "World"})},
      {"['a', 'b'].join('-')", "a-b"},
      {"'  x '.trim()", "x"},
      {"[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && [1, 2].sum() == 3", true},
      {"[1, 2, 2].isSorted() && ![2, 1].isSorted()", true},
      {"duration('1h') > duration('59m') && duration('90s') == duration('1m30s')", true},
      {"duration('1h30m').getMinutes()", 90},
      {"duration(self.window) >= duration(self.__for__)", true},
      {"m.__for__ == 5 && m.x__dash__y", true},
      {"has(m.__for__) && !has(m.__if__)", true},
      {"!has(self.codes) || !has(self.ignore) || !self.codes.exists(c, c in self.ignore)", true},
      {"int('42') + 1", 43},
      {"string(42) + 'x'", "42x"},
      {"double(1) / 2.0", 0.5},
      {"true ? 'y' : m.zz", "y"},
      {"r'a\\d' == 'a\\\\d'", true},
      {"'tab\\there'.size()", 8},
      {"0x10 + 1u", 17},
      {"[1, 2, 3][1]", 2},
      {"type(1) == 'int'", true},
  };
  for (const auto& c : cases) {
    Program p(c.expr);
    ASSERT_TRUE(p.ok()) << c.expr << ": " << p.error();
    Value v = p.Eval(Vars());
    ASSERT_TRUE(v.ok()) << c.expr << ": " << v.error;
    EXPECT_EQ(v.v, c.want) << c.expr;
  }
}

TEST(Cel, RuntimeErrorsAreErrors) {
  const char* errors[] = {
      "m.b == '1'",                            // missing key
      "l[5] == 1",                             // out of bounds
      "1 / 0 == 1",                            // division by zero
      "9223372036854775807 + 1 > 0",           // overflow
      "1 + 1.0 == 2.0",                        // no int/double mixing
      "duration('forever') > duration('1s')",  // malformed duration
      "int('x1') == 1",
      "l.all(x, x == 5 || m.zz == 1)",  // no element decides, one errs
      "[].min() == 0",
  };
  for (const char* e : errors) {
    Program p(e);
    ASSERT_TRUE(p.ok()) << e << ": " << p.error();
    EXPECT_FALSE(p.Eval(Vars()).ok()) << e;
  }
  // ... but logical operators and all/exists absorb them when the other side decides.
  EXPECT_EQ(Program("m.b == '1' && false").Eval(Vars()).v, false);
  EXPECT_EQ(Program("m.b == '1' || true").Eval(Vars()).v, true);
  EXPECT_EQ(Program("l.all(x, x == 1 && m.zz == 1)").Eval(Vars()).v, false);
  EXPECT_EQ(Program("l.exists(x, x == 3 || m.zz == 1)").Eval(Vars()).v, true);
}

TEST(Cel, SyntaxErrorsSayWhere) {
  struct {
    const char* expr;
    const char* where;
  } cases[] = {
      {"m.a ==", "ERROR: <input>:1:7:"},
      {"m.a === 'b'", "ERROR: <input>:1:7:"},
      {"self.for == 1", "ERROR: <input>:1:6:"},  // reserved word: must be escaped
      {"'unterminated", "ERROR: <input>:1:1:"},
      {"a &&\n  (b", "ERROR: <input>:2:5:"},
      {"has(m)", "ERROR: <input>:1:1: invalid argument to has() macro"},
  };
  for (const auto& c : cases) {
    Program p(c.expr);
    EXPECT_FALSE(p.ok()) << c.expr;
    EXPECT_EQ(p.error().rfind(c.where, 0), 0u) << c.expr << " -> " << p.error();
  }
}

TEST(Cel, CheckFindsUndeclaredNamesFunctionsAndFields) {
  json schema = {
      {"type", "object"},
      {"properties",
       {{"count", {{"type", "integer"}}},
        {"for", {{"type", "string"}}},
        {"free", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
        {"labels", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}}};
  Declarations d = {{"self", schema}, {"oldSelf", schema}};
  EXPECT_EQ(
      Program(
          "self.count > 1 && has(self.__for__) && self.free.anything == 1 && self.labels.x == 'y'")
          .Check(d),
      "");
  EXPECT_EQ(Program("self.cuont > 1").Check(d), "ERROR: <input>:1:5: undefined field 'cuont'");
  EXPECT_EQ(Program("other > 1").Check(d),
            "ERROR: <input>:1:1: undeclared reference to 'other' (in container '')");
  EXPECT_EQ(Program("self.count.frobnicate()").Check(d),
            "ERROR: <input>:1:11: undeclared reference to 'frobnicate' (in container '')");
  EXPECT_EQ(Program("self.labels.all(k, k.startsWith('a'))").Check(d), "");
  EXPECT_TRUE(Program("self == oldSelf").References("oldSelf"));
  EXPECT_FALSE(Program("self.count == 1").References("oldSelf"));
}

TEST(Cel, CostGrowsWithBoundsAndUnboundedListsAreHuge) {
  auto list_of_strings = [](json max_items, json max_len) {
    json item = {{"type", "string"}};
    if (!max_len.is_null()) item["maxLength"] = max_len;
    json s = {{"type", "array"}, {"items", item}};
    if (!max_items.is_null()) s["maxItems"] = max_items;
    return s;
  };
  Program p("self.all(x, x.contains('gpu'))");
  std::uint64_t small = p.EstimateCost({{"self", list_of_strings(25, 63)}}).max;
  std::uint64_t bigger = p.EstimateCost({{"self", list_of_strings(250, 63)}}).max;
  std::uint64_t unbounded = p.EstimateCost({{"self", list_of_strings(nullptr, nullptr)}}).max;
  EXPECT_GT(small, 100u);
  EXPECT_LT(small, 2000u);
  EXPECT_GT(bigger, 5 * small);
  EXPECT_GT(unbounded, 10'000'000u) << "an unbounded list of unbounded strings exceeds the limit";
  EXPECT_LT(Program("has(self.a) || has(self.b)").EstimateCost({{"self", json()}}).max, 10u);
}

TEST(Cel, Durations) {
  std::int64_t ns = 0;
  ASSERT_TRUE(ParseDuration("1h2m3.5s", &ns));
  EXPECT_EQ(ns, 3723500000000LL);
  ASSERT_TRUE(ParseDuration("0", &ns));
  EXPECT_EQ(ns, 0);
  EXPECT_FALSE(ParseDuration("5", &ns));
  EXPECT_FALSE(ParseDuration("5d", &ns));
  EXPECT_FALSE(ParseDuration("", &ns));
  EXPECT_EQ(UnescapeProperty("__for__"), "for");
  EXPECT_EQ(UnescapeProperty("a__dot__b__slash__c"), "a.b/c");
  EXPECT_EQ(UnescapeProperty("plain"), "plain");
}

}  // namespace
}  // namespace gg::cel
