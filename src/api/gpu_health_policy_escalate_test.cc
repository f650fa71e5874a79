// spec.remediation.escalate.template: absent by default, decodes, round-trips through the
// codec, and every bad reference is refused with its field path.
#include <gtest/gtest.h>

#include "api/gpu_health_policy.h"

namespace gg::api {
namespace {

constexpr char kSpec[] = R"({"remediation": {"escalate": {"template": {
  "apiVersion": "self-node-remediation.medik8s.io/v1alpha1",
  "kind": "SelfNodeRemediationTemplate", "namespace": "medik8s", "name": "automatic"}}}})";

TEST(PolicyEscalate, AbsentByDefaultDecodesAndRoundTrips) {
  EXPECT_FALSE(DefaultPolicySpec().remediation.escalate);
  auto spec = DecodeGpuHealthPolicySpec(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->remediation.escalate);
  const EscalationTemplate& t = *spec->remediation.escalate;
  EXPECT_EQ(t.api_version, "self-node-remediation.medik8s.io/v1alpha1");
  EXPECT_EQ(t.kind, "SelfNodeRemediationTemplate");
  EXPECT_EQ(t.RemediationKind(), "SelfNodeRemediation");
  EXPECT_EQ(t.namespace_, "medik8s");
  EXPECT_EQ(t.name, "automatic");
  EXPECT_TRUE(ValidatePolicySpec(*spec).empty());
  GpuHealthPolicy p;
  p.name = "p";
  p.spec = *spec;
  auto back = DecodeGpuHealthPolicy(EncodeGpuHealthPolicy(p));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->spec.remediation, spec->remediation);
}

TEST(PolicyEscalate, BadShapesAreRefusedWithThePath) {
  for (const char* bad : {R"({"remediation": {"escalate": {}}})",
                          R"({"remediation": {"escalate": {"template": "x"}}})",
                          R"({"remediation": {"escalate": {"template": {"kind": 3}}}})"}) {
    auto s = DecodeGpuHealthPolicySpec(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("remediation.escalate"), std::string::npos) << s.status();
  }
}

TEST(PolicyEscalate, ValidationNamesEachBadField) {
  const EscalationTemplate good{"g.example.com/v1", "FooTemplate", "ops", "t"};
  struct Case {
    EscalationTemplate t;
    const char* field;
  };
  for (const auto& c : {
           Case{{"v1", "FooTemplate", "ops", "t"}, "apiVersion"},  // core: not a CRD
           Case{{"g.example.com/", "FooTemplate", "ops", "t"}, "apiVersion"},
           Case{{"g.example.com/v1", "Foo", "ops", "t"}, "kind"},
           Case{{"g.example.com/v1", "Template", "ops", "t"}, "kind"},
           Case{{"g.example.com/v1", "foo-Template", "ops", "t"}, "kind"},
           Case{{"g.example.com/v1", "FooTemplate", "", "t"}, "namespace"},
           Case{{"g.example.com/v1", "FooTemplate", "Ops", "t"}, "namespace"},
           Case{{"g.example.com/v1", "FooTemplate", "ops", ""}, "name"},
       }) {
    GpuHealthPolicySpec s = DefaultPolicySpec();
    s.remediation.escalate = c.t;
    auto errs = ValidatePolicySpec(s);
    ASSERT_EQ(errs.size(), 1u) << c.field;
    EXPECT_EQ(errs[0].path, std::string("spec.remediation.escalate.template.") + c.field);
  }
  GpuHealthPolicySpec s = DefaultPolicySpec();
  s.remediation.escalate = good;
  EXPECT_TRUE(ValidatePolicySpec(s).empty());
}

}  // namespace
}  // namespace gg::api
