// Tests for the RBAC authorizer and YAML parsing (sim/rbac.h).
#include "sim/rbac.h"

#include <gtest/gtest.h>

namespace gg::sim {
namespace {

using nlohmann::json;

constexpr const char* kManifests = R"(
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpu-guardian-operator}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch, patch]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [gpuguardian.io]
  resources: ["*"]
  verbs: ["*"]
- nonResourceURLs: ["/metrics", "/debug/*"]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpu-guardian-operator}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpu-guardian-operator}
subjects:
- {kind: ServiceAccount, name: operator, namespace: gpu-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leader, namespace: gpu-system}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [gpu-guardian-operator]
  verbs: [get, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader, namespace: gpu-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader}
subjects:
- {kind: ServiceAccount, name: operator}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: operator, namespace: gpu-system}
)";

Attributes Req(std::string verb, std::string group, std::string resource, std::string ns = "",
               std::string name = "", std::string sub = "") {
  Attributes a;
  a.user = ServiceAccountUser("gpu-system", "operator");
  a.groups = ServiceAccountGroups("gpu-system");
  a.verb = std::move(verb);
  a.api_group = std::move(group);
  a.resource = std::move(resource);
  a.namespace_ = std::move(ns);
  a.name = std::move(name);
  a.subresource = std::move(sub);
  return a;
}

TEST(RbacTest, ServiceAccountsAndRules) {
  Authorizer az;
  ASSERT_TRUE(az.AddYaml(kManifests).ok());
  EXPECT_EQ(az.RoleCount(), 2u);
  EXPECT_EQ(az.BindingCount(), 2u);
  EXPECT_TRUE(az.Authorize(Req("patch", "", "nodes", "", "n1")).allowed);
  EXPECT_FALSE(az.Authorize(Req("delete", "", "nodes", "", "n1")).allowed);
  EXPECT_TRUE(az.Authorize(Req("create", "", "pods", "ml", "p", "eviction")).allowed);
  EXPECT_FALSE(az.Authorize(Req("delete", "", "pods", "ml", "p")).allowed);
  EXPECT_FALSE(az.Authorize(Req("get", "", "pods", "ml", "p", "log")).allowed);
  EXPECT_TRUE(
      az.Authorize(Req("update", "gpuguardian.io", "gpunodehealths", "", "n", "status")).allowed);
  // resourceNames and namespace of the RoleBinding.
  EXPECT_TRUE(az.Authorize(Req("update", "coordination.k8s.io", "leases", "gpu-system",
                               "gpu-guardian-operator"))
                  .allowed);
  EXPECT_FALSE(
      az.Authorize(Req("update", "coordination.k8s.io", "leases", "gpu-system", "other")).allowed);
  EXPECT_FALSE(
      az.Authorize(Req("get", "coordination.k8s.io", "leases", "default", "gpu-guardian-operator"))
          .allowed);
  EXPECT_FALSE(az.Authorize(Req("list", "coordination.k8s.io", "leases", "gpu-system")).allowed);
  EXPECT_TRUE(az.Authorize(Req("create", "coordination.k8s.io", "leases", "gpu-system")).allowed);
  // Other users get nothing.
  Attributes other = Req("get", "", "nodes");
  other.user = ServiceAccountUser("default", "default");
  other.groups = ServiceAccountGroups("default");
  EXPECT_FALSE(az.Authorize(other).allowed);
  other.groups.push_back("system:masters");
  EXPECT_TRUE(az.Authorize(other).allowed);
  // Non-resource URLs.
  Attributes nr = Req("get", "", "");
  nr.is_resource_request = false;
  nr.path = "/metrics";
  EXPECT_TRUE(az.Authorize(nr).allowed);
  nr.path = "/debug/pprof";
  EXPECT_TRUE(az.Authorize(nr).allowed);
  nr.path = "/healthz";
  EXPECT_FALSE(az.Authorize(nr).allowed);
}

TEST(RbacTest, ForbiddenBodies) {
  auto s = ForbiddenStatus(Req("create", "", "pods", "ml", "p1", "eviction"));
  EXPECT_EQ(s["code"], 403);
  EXPECT_EQ(s["reason"], "Forbidden");
  EXPECT_EQ(
      s["message"],
      "pods \"p1\" is forbidden: User \"system:serviceaccount:gpu-system:operator\" cannot create "
      "resource \"pods/eviction\" in API group \"\" in the namespace \"ml\"");
  EXPECT_EQ(s["details"]["kind"], "pods");
  auto l = ForbiddenStatus(Req("list", "coordination.k8s.io", "leases"));
  EXPECT_EQ(
      l["message"],
      "leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:gpu-system:operator\" "
      "cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope");
}

TEST(RbacTest, UsedAndUnusedPermissions) {
  Authorizer az;
  ASSERT_TRUE(az.AddYaml(kManifests).ok());
  Attributes a = Req("get", "", "nodes", "", "n1");
  ASSERT_TRUE(az.Authorize(a).allowed);
  ASSERT_TRUE(az.Authorize(Req("create", "", "pods", "ml", "p", "eviction")).allowed);
  auto used = az.UsedPermissions();
  ASSERT_EQ(used[a.user].size(), 2u);
  auto unused = az.GrantedButUnused(a.user, a.groups);
  auto has = [&](const UsedPermission& p) {
    return std::find(unused.begin(), unused.end(), p) != unused.end();
  };
  EXPECT_TRUE(has({"patch", "", "nodes", ""}));
  EXPECT_FALSE(has({"get", "", "nodes", ""}));
  EXPECT_FALSE(has({"create", "", "pods", "eviction"}));
  EXPECT_TRUE(has({"create", "coordination.k8s.io", "leases", ""}));
}

TEST(RbacTest, AggregationAndRemove) {
  Authorizer az;
  ASSERT_TRUE(az.Add(json::parse(R"({"kind":"ClusterRole","metadata":{"name":"agg"},
    "aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"agg":"true"}}]}})"))
                  .ok());
  ASSERT_TRUE(
      az.Add(
            json::parse(R"({"kind":"ClusterRole","metadata":{"name":"part","labels":{"agg":"true"}},
    "rules":[{"apiGroups":[""],"resources":["nodes"],"verbs":["get"]}]})"))
          .ok());
  ASSERT_TRUE(az.Add(json::parse(R"({"kind":"ClusterRoleBinding","metadata":{"name":"b"},
    "roleRef":{"kind":"ClusterRole","name":"agg"},"subjects":[{"kind":"User","name":"alice"}]})"))
                  .ok());
  Attributes a;
  a.user = "alice";
  a.verb = "get";
  a.resource = "nodes";
  EXPECT_TRUE(az.Authorize(a).allowed);
  az.Remove("ClusterRole", "", "part");
  EXPECT_FALSE(az.Authorize(a).allowed);
  // RoleBinding to a ClusterRole grants it within the namespace only.
  ASSERT_TRUE(az.Add(json::parse(R"({"kind":"ClusterRole","metadata":{"name":"pods"},
    "rules":[{"apiGroups":[""],"resources":["pods","*/status"],"verbs":["get"]}]})"))
                  .ok());
  ASSERT_TRUE(az.Add(json::parse(R"({"kind":"RoleBinding","metadata":{"name":"rb","namespace":"ml"},
    "roleRef":{"kind":"ClusterRole","name":"pods"},"subjects":[{"kind":"Group","name":"team"}]})"))
                  .ok());
  Attributes g;
  g.user = "bob";
  g.groups = {"team"};
  g.verb = "get";
  g.resource = "pods";
  g.namespace_ = "ml";
  EXPECT_TRUE(az.Authorize(g).allowed);
  g.subresource = "status";
  EXPECT_TRUE(az.Authorize(g).allowed);
  g.namespace_ = "other";
  EXPECT_FALSE(az.Authorize(g).allowed);
}

TEST(RbacTest, BadInput) {
  Authorizer az;
  EXPECT_FALSE(az.Add(json::array()).ok());
  EXPECT_FALSE(az.Add(json::parse(R"({"kind":"Role","metadata":{}})")).ok());
  EXPECT_FALSE(
      az.Add(json::parse(R"({"kind":"Role","metadata":{"name":"x"},"rules":[{"verbs":"get"}]})"))
          .ok());
  EXPECT_FALSE(az.Add(json::parse(R"({"kind":"RoleBinding","metadata":{"name":"x"}})")).ok());
  EXPECT_FALSE(
      az
          .Add(json::parse(
              R"({"kind":"ClusterRoleBinding","metadata":{"name":"x"},"roleRef":{"kind":"Role","name":"r"}})"))
          .ok());
  EXPECT_TRUE(az.Add(json::parse(R"({"kind":"ConfigMap"})")).ok());
  auto bad = az.AddYaml("a: [1, 2\nb: c\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("yaml: line"), std::string::npos);
}

TEST(YamlTest, ScalarsAndDocuments) {
  auto docs = ParseYamlDocuments(R"(
a: 1
b: "1"
c: true
d: yes
e: null
f: 1.5
g: "true"
h: nvidia.com/gpu
i: [x, 2]
j: ~
k: 0x10
---
---
kind: Second
)");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0], json::parse(R"({"a":1,"b":"1","c":true,"d":true,"e":null,"f":1.5,"g":"true",
                                       "h":"nvidia.com/gpu","i":["x",2],"j":null,"k":16})"));
  EXPECT_EQ((*docs)[1]["kind"], "Second");
  EXPECT_FALSE(ParseYamlDocuments("? [a]\n: b\n").ok());
  EXPECT_FALSE(ParseYamlDocuments("a: b: c").ok());
  EXPECT_TRUE(ParseYamlDocuments("")->empty());
}

}  // namespace
}  // namespace gg::sim
