// Tests for label/field selectors and name/label/annotation validation (sim/selector.h).
#include "sim/selector.h"

#include <gtest/gtest.h>

namespace gg::sim {
namespace {

using nlohmann::json;

FieldMap L(std::initializer_list<std::pair<const char*, const char*>> kv) {
  FieldMap m;
  for (auto& [k, v] : kv) m.emplace_back(k, v);
  std::sort(m.begin(), m.end());
  return m;
}

TEST(LabelSelectorTest, EqualityAndSetBased) {
  auto s = LabelSelector::Parse("app=a, tier!=db,env in (prod, staging),zone notin (z1),gpu,!skip");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->requirements().size(), 6u);
  EXPECT_TRUE(s->Matches(L({{"app", "a"}, {"env", "prod"}, {"gpu", ""}})));
  EXPECT_FALSE(s->Matches(L({{"app", "a"}, {"env", "prod"}})));               // no gpu
  EXPECT_FALSE(s->Matches(L({{"app", "a"}, {"env", "dev"}, {"gpu", "1"}})));  // env
  EXPECT_FALSE(s->Matches(L({{"app", "a"}, {"env", "prod"}, {"gpu", "1"}, {"skip", "x"}})));
  EXPECT_FALSE(s->Matches(L({{"app", "a"}, {"env", "prod"}, {"gpu", "1"}, {"tier", "db"}})));
  EXPECT_TRUE(LabelSelector::Parse("a==b")->Matches(L({{"a", "b"}})));
  EXPECT_TRUE(LabelSelector::Parse("")->Empty());
  EXPECT_TRUE(LabelSelector::Parse("")->Matches(L({})));
}

TEST(LabelSelectorTest, PrefixedKeysAndNumbers) {
  auto s = LabelSelector::Parse("nvidia.com/gpu.product,nvidia.com/gpu.count>4");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->Matches(L({{"nvidia.com/gpu.product", "H100"}, {"nvidia.com/gpu.count", "8"}})));
  EXPECT_FALSE(s->Matches(L({{"nvidia.com/gpu.product", "H100"}, {"nvidia.com/gpu.count", "2"}})));
  EXPECT_TRUE(LabelSelector::Parse("n<3")->Matches(L({{"n", "2"}})));
  EXPECT_FALSE(LabelSelector::Parse("n<3")->Matches(L({{"n", "x"}})));
}

TEST(LabelSelectorTest, JsonFormsAndMatchJson) {
  auto s = LabelSelector::FromJson(json::parse(
      R"({"matchLabels":{"app":"x"},"matchExpressions":[{"key":"t","operator":"In","values":["a","b"]},{"key":"k","operator":"DoesNotExist"}]})"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->MatchesJson(json::parse(R"({"app":"x","t":"b"})")));
  EXPECT_FALSE(s->MatchesJson(json::parse(R"({"app":"x","t":"b","k":""})")));
  EXPECT_FALSE(s->MatchesJson(nullptr));
  EXPECT_TRUE(LabelSelector::FromJson(json::object())->MatchesJson(nullptr));
  EXPECT_FALSE(LabelSelector::FromJson(nullptr)->MatchesJson(json::object()));
  EXPECT_FALSE(
      LabelSelector::FromJson(json::parse(R"({"matchExpressions":[{"key":"a","operator":"Foo"}]})"))
          .ok());
  EXPECT_FALSE(
      LabelSelector::FromJson(json::parse(R"({"matchExpressions":[{"key":"a","operator":"In"}]})"))
          .ok());
  EXPECT_FALSE(LabelSelector::FromJson(json::parse(R"({"matchLabels":{"a":1}})")).ok());
  EXPECT_FALSE(LabelSelector::FromJson(json::array()).ok());
}

TEST(LabelSelectorTest, ErrorsLikeApimachinery) {
  auto e = LabelSelector::Parse("a b");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
  auto v = LabelSelector::Parse("a=b c");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "found 'c', expected: ',' or 'end of string'");
  auto bad_value = LabelSelector::Parse("a=-x");
  ASSERT_FALSE(bad_value.ok());
  EXPECT_NE(
      bad_value.status().message().find("values[0][a]: Invalid value: \"-x\": a valid label must"),
      std::string::npos);
  EXPECT_FALSE(LabelSelector::Parse("a in ()").ok());
  EXPECT_FALSE(LabelSelector::Parse("a in b").ok());
  EXPECT_FALSE(LabelSelector::Parse("a>x").ok());
  EXPECT_FALSE(LabelSelector::Parse("a,").ok());
  EXPECT_FALSE(LabelSelector::Parse(",a").ok());
  EXPECT_FALSE(LabelSelector::Parse("!").ok());
  EXPECT_FALSE(LabelSelector::Parse("a/b/c=1").ok());
  EXPECT_FALSE(LabelSelector::Parse("(").ok());
  EXPECT_EQ(LabelSelector::Parse("b=2,a in (x,y)")->ToString(), "a in (x,y),b=2");
}

TEST(FieldSelectorTest, ParseAndMatchObjects) {
  auto s = FieldSelector::Parse("spec.nodeName=gpu-node-1,status.phase!=Succeeded");
  ASSERT_TRUE(s.ok()) << s.status();
  json pod = json::parse(
      R"({"metadata":{"name":"p","namespace":"ml"},"spec":{"nodeName":"gpu-node-1"},"status":{"phase":"Running"}})");
  EXPECT_TRUE(s->MatchesObject("", "pods", pod));
  pod["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(s->MatchesObject("", "pods", pod));
  EXPECT_TRUE(s->ValidateFor("", "pods", true).ok());
  ASSERT_NE(s->EqualityValue("spec.nodeName"), nullptr);
  EXPECT_EQ(*s->EqualityValue("spec.nodeName"), "gpu-node-1");
  EXPECT_EQ(*FieldSelector::Parse("a=c\\=d\\,e")->EqualityValue("a"), "c=d,e");
}

TEST(FieldSelectorTest, NodesUnschedulableAndUnsupported) {
  json node = json::parse(R"({"metadata":{"name":"n1"},"spec":{}})");
  EXPECT_EQ(FieldValue("", "nodes", node, "spec.unschedulable"), "false");
  EXPECT_TRUE(FieldSelector::Parse("spec.unschedulable=false")->MatchesObject("", "nodes", node));
  node["spec"]["unschedulable"] = true;
  EXPECT_TRUE(FieldSelector::Parse("spec.unschedulable==true")->MatchesObject("", "nodes", node));
  auto st = FieldSelector::Parse("spec.nodeName=x")->ValidateFor("", "nodes", false);
  EXPECT_EQ(st.message(), "field label not supported: spec.nodeName");
  EXPECT_FALSE(FieldSelector::Parse("metadata.namespace=x")->ValidateFor("", "nodes", false).ok());
  EXPECT_TRUE(
      FieldSelector::Parse("spec.x=1")->ValidateFor("g.io", "foos", false, {"spec.x"}).ok());
  auto idx = IndexFields("", "nodes", false, node);
  ASSERT_NE(FindField(idx, "spec.unschedulable"), nullptr);
  EXPECT_EQ(*FindField(idx, "spec.unschedulable"), "true");
}

TEST(FieldSelectorTest, EventsBothShapes) {
  json core = json::parse(
      R"({"metadata":{"name":"e","namespace":"default"},"involvedObject":{"kind":"Node","name":"n1"},
                             "reason":"GPUUnhealthy","type":"Warning","source":{"component":"op"}})");
  json v1 = json::parse(
      R"({"metadata":{"name":"e","namespace":"default"},"regarding":{"kind":"Node","name":"n1"},
                           "reason":"GPUUnhealthy","type":"Warning","reportingController":"op"})");
  auto s = FieldSelector::Parse(
      "involvedObject.kind=Node,involvedObject.name=n1,reason=GPUUnhealthy,type=Warning");
  EXPECT_TRUE(s->MatchesObject("", "events", core));
  EXPECT_TRUE(s->MatchesObject("events.k8s.io", "events", v1));
  EXPECT_EQ(FieldValue("", "events", core, "source"), "op");
  EXPECT_EQ(FieldValue("", "events", v1, "reportingComponent"), "op");
  EXPECT_TRUE(FieldSelector::Parse("source=op")->ValidateFor("", "events", true).ok());
}

TEST(FieldSelectorTest, Errors) {
  auto e = FieldSelector::Parse("abc");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "invalid selector: 'abc'; can't understand 'abc'");
  EXPECT_FALSE(FieldSelector::Parse("a=b=c").ok());
  EXPECT_FALSE(FieldSelector::Parse("=b").ok());
  EXPECT_FALSE(FieldSelector::Parse("a=b\\").ok());
  EXPECT_FALSE(FieldSelector::Parse("a=\\q").ok());
  EXPECT_TRUE(FieldSelector::Parse("  ")->Empty());
}

TEST(SyntaxTest, NamesLabelsAnnotations) {
  EXPECT_TRUE(IsDns1123Subdomain("gpu-node-1.example").empty());
  auto e = IsDns1123Subdomain("Foo_bar");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(
      e[0],
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
      "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
      "regex used for validation is "
      "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  EXPECT_EQ(IsDns1123Subdomain(std::string(254, 'a')).size(), 1u);
  EXPECT_NE(IsDns1123Label("a.b").size(), 0u);
  EXPECT_TRUE(IsDns1123Label("my-name").empty());
  EXPECT_TRUE(IsQualifiedName("nvidia.com/gpu.product").empty());
  EXPECT_TRUE(IsQualifiedName("MyName").empty());
  EXPECT_EQ(IsQualifiedName("/x")[0], "prefix part must be non-empty");
  EXPECT_EQ(IsQualifiedName(std::string(64, 'a'))[0],
            "name part must be no more than 63 characters");
  EXPECT_FALSE(IsQualifiedName("a/b/c").empty());
  EXPECT_FALSE(IsQualifiedName("Bad_Prefix/x").empty());
  EXPECT_TRUE(IsValidLabelValue("").empty());
  EXPECT_TRUE(IsValidLabelValue("NVIDIA-H100-80GB-HBM3").empty());
  EXPECT_FALSE(IsValidLabelValue("a b").empty());
  EXPECT_FALSE(IsValidLabelValue(std::string(64, 'a')).empty());
}

TEST(SyntaxTest, ValidateObjectMeta) {
  EXPECT_TRUE(
      ValidateObjectMeta(json::parse(R"({"name":"n1","labels":{"a":"b"}})"), false).empty());
  auto c = ValidateObjectMeta(json::parse(R"({"name":"Bad_Name"})"), false);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].reason, "FieldValueInvalid");
  EXPECT_EQ(c[0].field, "metadata.name");
  EXPECT_EQ(c[0].message.rfind("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain", 0),
            0u);
  auto req = ValidateObjectMeta(json::object(), true);
  ASSERT_EQ(req.size(), 2u);
  EXPECT_EQ(req[0].field, "metadata.name");
  EXPECT_EQ(req[0].message, "Required value: name or generateName is required");
  EXPECT_EQ(req[1].field, "metadata.namespace");
  EXPECT_TRUE(ValidateObjectMeta(json::parse(R"({"generateName":"ev-"})"), false).empty());
  EXPECT_EQ(ValidateObjectMeta(json::parse(R"({"name":"x","namespace":"d"})"), false)[0].reason,
            "FieldValueForbidden");
  auto lab = ValidateObjectMeta(
      json::parse(R"({"name":"x","labels":{"bad key":"v","k":"bad value"}})"), false);
  ASSERT_EQ(lab.size(), 2u);
  EXPECT_EQ(lab[0].field, "metadata.labels");
  json big = {{"name", "x"}, {"annotations", {{"a", std::string(300 * 1024, 'x')}}}};
  auto tl = ValidateObjectMeta(big, false);
  ASSERT_EQ(tl.size(), 1u);
  EXPECT_EQ(tl[0].reason, "FieldValueTooLong");
  EXPECT_EQ(tl[0].message, "Too long: may not be more than 262144 bytes");
  EXPECT_FALSE(ValidateObjectMeta(json::parse(R"({"name":5})"), false).empty());
  EXPECT_FALSE(
      ValidateObjectMeta(json::parse(R"({"name":"x","ownerReferences":[{"kind":"A"}]})"), false)
          .empty());
  EXPECT_FALSE(ValidateObjectMeta("str", false).empty());
  EXPECT_EQ(NotSupportedCause("spec.taints[0].effect", "Foo", {"NoExecute", "NoSchedule"}).message,
            "Unsupported value: \"Foo\": supported values: \"NoExecute\", \"NoSchedule\"");
}

}  // namespace
}  // namespace gg::sim
