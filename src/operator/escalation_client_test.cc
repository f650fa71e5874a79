// EscalationClient's pure half: the REST resource of a kind, and the remediation object built
// from a template object (kind without Template, named after the node, in the template's
// namespace, spec copied from spec.template.spec, labelled and annotated as ours).
#include "operator/escalation_client.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gg::op {
namespace {

const api::EscalationTemplate kTmpl{"self-node-remediation.medik8s.io/v1alpha1",
                                    "SelfNodeRemediationTemplate", "medik8s", "automatic"};

TEST(EscalationClient, ResourceIsTheLowercasePluralOfTheKind) {
  auto t = EscalationResource(kTmpl.api_version, kTmpl.RemediationKind());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->group, "self-node-remediation.medik8s.io");
  EXPECT_EQ(t->version, "v1alpha1");
  EXPECT_EQ(t->resource, "selfnoderemediations");
  EXPECT_TRUE(t->namespaced);
  EXPECT_EQ(t->ObjectPath("medik8s", "gpu-1"),
            "/apis/self-node-remediation.medik8s.io/v1alpha1/namespaces/medik8s/"
            "selfnoderemediations/gpu-1");
  EXPECT_FALSE(EscalationResource("v1", "Pod").ok()) << "core kinds are never templates";
}

TEST(EscalationClient, ObjectCopiesTheTemplateSpecAndNamesTheNodeAndUs) {
  const char* tmpl = R"({"apiVersion":"x/v1","kind":"SelfNodeRemediationTemplate",
    "metadata":{"name":"automatic","namespace":"medik8s","uid":"u1"},
    "spec":{"template":{"spec":{"remediationStrategy":"Automatic","n":[1,2]}}}})";
  auto body = BuildRemediationObject(kTmpl, {"gpu-1", "gpu-1-1800000000", "gpu"}, tmpl);
  ASSERT_TRUE(body.ok()) << body.status();
  auto j = nlohmann::json::parse(*body);
  EXPECT_EQ(j["apiVersion"], kTmpl.api_version);
  EXPECT_EQ(j["kind"], "SelfNodeRemediation");
  EXPECT_EQ(j["metadata"]["name"], "gpu-1");
  EXPECT_EQ(j["metadata"]["namespace"], "medik8s");
  EXPECT_EQ(j["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpu-guardian");
  EXPECT_EQ(j["metadata"]["labels"]["gpuguardian.io/node"], "gpu-1");
  EXPECT_EQ(j["metadata"]["annotations"]["gpuguardian.io/occurrence"], "gpu-1-1800000000");
  EXPECT_EQ(j["metadata"]["annotations"]["gpuguardian.io/template"], "medik8s/automatic");
  EXPECT_FALSE(j["metadata"].contains("uid"));
  EXPECT_EQ(j["spec"], nlohmann::json::parse(R"({"remediationStrategy":"Automatic","n":[1,2]})"));
}

TEST(EscalationClient, TemplateWithoutSpecTemplateSpecIsAClearError) {
  for (const char* bad :
       {"not json", "[]", R"({"spec":{}})", R"({"spec":{"template":{"spec":3}}})"}) {
    auto body = BuildRemediationObject(kTmpl, {"gpu-1", "o", "p"}, bad);
    ASSERT_FALSE(body.ok()) << bad;
    EXPECT_NE(body.status().message().find("medik8s/automatic"), std::string::npos)
        << body.status();
  }
}

}  // namespace
}  // namespace gg::op
