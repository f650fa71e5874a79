// The shared helpers with one definition each: strings, ParseDurationFlag, LabelSelector.
#include "common/strings.h"

#include <gtest/gtest.h>

#include "common/label_selector.h"
#include "common/time_util.h"

namespace gg {
namespace {

TEST(Strings, LowerTrimJoin) {
  EXPECT_EQ(Lower("Content-Type: X"), "content-type: x");
  EXPECT_EQ(Lower("\xc3\x84"), "\xc3\x84");  // non-ASCII bytes unchanged
  EXPECT_EQ(TrimSpace(" \t a b \r\n"), "a b");
  EXPECT_EQ(TrimSpace("   "), "");
  EXPECT_EQ(Join({}, ","), "");
  EXPECT_EQ(Join({"a"}, ","), "a");
  EXPECT_EQ(Join({"a", "", "c"}, ", "), "a, , c");
}

TEST(ParseDurationFlag, PositiveDurationsOnly) {
  Duration d{};
  EXPECT_TRUE(ParseDurationFlag("--x", "1m30s", &d));
  EXPECT_EQ(d, std::chrono::seconds(90));
  EXPECT_FALSE(ParseDurationFlag("--x", "0s", &d));
  EXPECT_FALSE(ParseDurationFlag("--x", "soon", &d));
  EXPECT_EQ(d, std::chrono::seconds(90)) << "a bad flag leaves the value alone";
}

struct Store {  // any label store with Get(), like k8s::LabelMap
  std::map<std::string, std::string> m;
  std::optional<std::string_view> Get(std::string_view k) const {
    auto it = m.find(std::string(k));
    if (it == m.end()) return std::nullopt;
    return std::string_view(it->second);
  }
};

TEST(LabelSelector, MatchesEveryOperatorOnMapsAndStores) {
  LabelSelector s;
  s.match_labels = {{"app", "x"}};
  s.match_expressions = {{"tier", "In", {"a", "b"}},
                         {"zone", "NotIn", {"z"}},
                         {"gpu", "Exists", {}},
                         {"gone", "DoesNotExist", {}}};
  std::map<std::string, std::string> ok = {{"app", "x"}, {"tier", "b"}, {"gpu", ""}};
  EXPECT_TRUE(s.Matches(ok));
  EXPECT_TRUE(s.Matches(Store{ok}));
  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"app", "y"}, {"tier", "c"}, {"zone", "z"}, {"gone", "1"}}) {
    auto bad = ok;
    bad[k] = v;
    EXPECT_FALSE(s.Matches(bad)) << k << "=" << v;
    EXPECT_FALSE(s.Matches(Store{bad})) << k << "=" << v;
  }
  auto no_gpu = ok;
  no_gpu.erase("gpu");
  EXPECT_FALSE(s.Matches(no_gpu));
  EXPECT_TRUE(LabelSelector{}.Matches(std::map<std::string, std::string>{}));
  LabelSelector unknown;
  unknown.match_expressions = {{"a", "Near", {"b"}}};
  EXPECT_FALSE(unknown.Matches(std::map<std::string, std::string>{{"a", "b"}}));
  EXPECT_FALSE(unknown.Validate().ok());
}

TEST(LabelSelector, QueryFormAndValidation) {
  LabelSelector s;
  s.match_labels = {{"a", "b"}};
  s.match_expressions = {{"c", "In", {"y", "x"}}, {"d", "DoesNotExist", {}}, {"e", "Exists", {}}};
  EXPECT_EQ(s.ToQuery(), "a=b,c in (x,y),!d,e");
  EXPECT_TRUE(s.Validate().ok());
  LabelSelector bad;
  bad.match_expressions = {{"c", "In", {}}};
  EXPECT_FALSE(bad.Validate().ok());
  bad.match_expressions = {{"c", "Exists", {"v"}}};
  EXPECT_FALSE(bad.Validate().ok());
  bad.match_expressions = {{"", "Exists", {}}};
  EXPECT_FALSE(bad.Validate().ok());
}

}  // namespace
}  // namespace gg
