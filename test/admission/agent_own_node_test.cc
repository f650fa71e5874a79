// deploy/admission/agent-own-node.yaml, evaluated as the API server would: the manifest's
// own CEL expressions (matchConditions, validations, messageExpression) run in the
// simulator's CEL evaluator (src/sim/cel) against admission requests an agent can make.
// failurePolicy Fail means a runtime error denies. The whole policy enforced by the simulator
// (bindings, matching, RBAC tokens) is tested in src/sim/admission_test.cc.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/cel/cel.h"

namespace gg::cel {
namespace {

using json = nlohmann::json;

const std::string kAgent = "system:serviceaccount:gpu-guardian:gpu-guardian-agent";

json ToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = ToJson(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& e : n) j.push_back(ToJson(e));
      return j;
    }
    case YAML::NodeType::Scalar:
      return n.Scalar();
    default:
      return nullptr;
  }
}

struct Request {
  std::string user = kAgent;
  json extra = json::object();  // userInfo.extra
  std::string operation = "UPDATE";
  std::string group, resource, subresource, name;
  json object, old_object;
};

struct Decision {
  bool allowed = true;
  std::string message;
};

// One ValidatingAdmissionPolicy + its binding (validationActions Deny), applied to a request.
class Policy {
 public:
  static Policy Load() {
    Policy p;
    for (const auto& doc : YAML::LoadAllFromFile(std::string(GG_SOURCE_DIR) +
                                                 "/deploy/admission/agent-own-node.yaml")) {
      json j = ToJson(doc);
      if (j.value("kind", "") == "ValidatingAdmissionPolicy") p.policy_ = j;
      if (j.value("kind", "") == "ValidatingAdmissionPolicyBinding") p.binding_ = j;
    }
    return p;
  }
  const json& policy() const { return policy_; }
  const json& binding() const { return binding_; }

  bool Matches(const Request& r) const {
    std::string res = r.resource + (r.subresource.empty() ? "" : "/" + r.subresource);
    auto has = [](const json& list, const std::string& v) {
      for (const auto& e : list)
        if (e == v || e == "*") return true;
      return false;
    };
    for (const auto& rule : policy_["spec"]["matchConstraints"]["resourceRules"])
      if (has(rule["apiGroups"], r.group) && has(rule["operations"], r.operation) &&
          has(rule["resources"], res))
        return true;
    return false;
  }

  Decision Admit(const Request& r) const {
    if (!Matches(r)) return {};
    json request = {{"userInfo", {{"username", r.user}, {"extra", r.extra}}},
                    {"operation", r.operation},
                    {"name", r.name},
                    {"resource", {{"group", r.group}, {"version", "v1"}, {"resource", r.resource}}},
                    {"subResource", r.subresource}};
    std::map<std::string, json> vars = {
        {"request", request}, {"object", r.object}, {"oldObject", r.old_object}};
    const bool fail_closed = policy_["spec"].value("failurePolicy", "Fail") == "Fail";
    for (const auto& mc : policy_["spec"]["matchConditions"]) {
      Value v = Program(mc["expression"].get<std::string>()).Eval(vars);
      if (!v.ok())
        return fail_closed ? Decision{false, "matchCondition error: " + v.error} : Decision{};
      if (v.v != true) return {};  // not for this policy
    }
    for (const auto& val : policy_["spec"]["validations"]) {
      Value v = Program(val["expression"].get<std::string>()).Eval(vars);
      if (!v.ok()) {
        if (fail_closed) return {false, "validation error: " + v.error};
        continue;
      }
      if (v.v == true) continue;
      std::string msg = val.value("message", "failed expression");
      if (val.contains("messageExpression")) {
        Value m = Program(val["messageExpression"].get<std::string>()).Eval(vars);
        if (m.ok() && m.v.is_string()) msg = m.v.get<std::string>();
      }
      return {false, msg};
    }
    return {};
  }

 private:
  json policy_, binding_;
};

json Extra(const std::string& node) {
  return {{"authentication.kubernetes.io/node-name", json::array({node})}};
}

Request Report(const std::string& caller_node, const std::string& target, const std::string& op,
               const std::string& sub = "status") {
  Request r;
  r.extra = Extra(caller_node);
  r.operation = op;
  r.group = "gpuguardian.io";
  r.resource = "gpunodehealths";
  r.subresource = op == "CREATE" ? "" : sub;
  r.name = target;
  r.object = {{"metadata", {{"name", target}}}, {"status", {{"nodeName", target}}}};
  if (op == "UPDATE") r.old_object = r.object;
  return r;
}

json NodeObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/hostname", name}, {"nvidia.com/gpu.present", "true"}}},
            {"annotations",
             {{"node.alpha.kubernetes.io/ttl", "0"},
              {"gpuguardian.io/remediation", R"({"version":1})"}}}}},
          {"spec", {{"podCIDR", "10.0.0.0/24"}}}};
}

// The agent patching its Node: `mutate` turns the old object into the new one.
Request NodePatch(const std::string& caller_node, const std::string& target,
                  const std::function<void(json&)>& mutate, json old = nullptr) {
  Request r;
  r.extra = Extra(caller_node);
  r.resource = "nodes";
  r.name = target;
  r.old_object = old.is_null() ? NodeObject(target) : old;
  r.object = r.old_object;
  mutate(r.object);
  return r;
}

TEST(AgentOwnNodePolicy, ManifestParsesAndEveryExpressionCompiles) {
  Policy p = Policy::Load();
  ASSERT_TRUE(p.policy().is_object());
  ASSERT_TRUE(p.binding().is_object()) << "a policy without a binding enforces nothing";
  EXPECT_EQ(p.binding()["spec"]["policyName"], p.policy()["metadata"]["name"]);
  EXPECT_EQ(p.binding()["spec"]["validationActions"], json::array({"Deny"}));
  EXPECT_EQ(p.policy()["spec"]["failurePolicy"], "Fail");
  int n = 0;
  for (const char* list : {"matchConditions", "validations"})
    for (const auto& e : p.policy()["spec"][list])
      for (const char* key : {"expression", "messageExpression"})
        if (e.contains(key)) {
          Program prog(e[key].get<std::string>());
          EXPECT_TRUE(prog.ok()) << e[key] << ": " << prog.error();
          ++n;
        }
  EXPECT_GE(n, 4);
}

TEST(AgentOwnNodePolicy, ReportsOnlyForTheAgentsOwnNode) {
  Policy p = Policy::Load();
  EXPECT_TRUE(p.Admit(Report("gpu-1", "gpu-1", "CREATE")).allowed);
  EXPECT_TRUE(p.Admit(Report("gpu-1", "gpu-1", "UPDATE")).allowed);
  Decision other = p.Admit(Report("gpu-1", "gpu-2", "UPDATE"));
  EXPECT_FALSE(other.allowed);
  EXPECT_EQ(other.message, "gpu-guardian-agent may only write objects of its own node, not gpu-2");
  EXPECT_FALSE(p.Admit(Report("gpu-1", "gpu-2", "CREATE")).allowed);
  // The main resource too, not only /status.
  EXPECT_FALSE(p.Admit(Report("gpu-1", "gpu-2", "UPDATE", "")).allowed);
}

Request Lease(const std::string& caller_node, const std::string& name, const std::string& holder,
              const std::string& op) {
  Request r;
  r.extra = Extra(caller_node);
  r.operation = op;
  r.group = "coordination.k8s.io";
  r.resource = "leases";
  r.name = name;
  r.object = {{"metadata", {{"name", name}, {"namespace", "gpu-guardian"}}},
              {"spec", {{"holderIdentity", holder}, {"renewTime", "2026-01-01T00:00:00.000000Z"}}}};
  if (op == "UPDATE") r.old_object = r.object;
  return r;
}

TEST(AgentOwnNodePolicy, HeartbeatLeaseOnlyForTheAgentsOwnNode) {
  Policy p = Policy::Load();
  for (const char* op : {"CREATE", "UPDATE"}) {
    EXPECT_TRUE(p.Admit(Lease("gpu-1", "gpu-guardian-agent-gpu-1", "gpu-1", op)).allowed) << op;
    Decision other = p.Admit(Lease("gpu-1", "gpu-guardian-agent-gpu-2", "gpu-2", op));
    EXPECT_FALSE(other.allowed) << op;
    EXPECT_EQ(
        other.message,
        "gpu-guardian-agent may only write objects of its own node, not gpu-guardian-agent-gpu-2");
    // Its own Lease naming another holder, or another name altogether.
    EXPECT_FALSE(p.Admit(Lease("gpu-1", "gpu-guardian-agent-gpu-1", "gpu-2", op)).allowed) << op;
    EXPECT_FALSE(p.Admit(Lease("gpu-1", "gpu-1", "gpu-1", op)).allowed) << op;
    EXPECT_FALSE(p.Admit(Lease("gpu-1", "gpu-guardian-operator", "gpu-1", op)).allowed) << op;
  }
  Request no_holder = Lease("gpu-1", "gpu-guardian-agent-gpu-1", "gpu-1", "UPDATE");
  no_holder.object["spec"].erase("holderIdentity");
  EXPECT_FALSE(p.Admit(no_holder).allowed);
  // The operator's own Leases are not the agent's business.
  Request op = Lease("", "gpu-guardian-operator", "op-1", "UPDATE");
  op.user = "system:serviceaccount:gpu-guardian:gpu-guardian-operator";
  op.extra = json::object();
  EXPECT_TRUE(p.Admit(op).allowed);
}

TEST(AgentOwnNodePolicy, AgentTokensWithoutNodeBindingAreDenied) {
  Policy p = Policy::Load();
  Request legacy = Report("gpu-1", "gpu-1", "UPDATE");
  legacy.extra = json::object();  // a long-lived secret token carries no node name
  Decision d = p.Admit(legacy);
  EXPECT_FALSE(d.allowed) << "fail closed";
  Request empty = Report("gpu-1", "gpu-1", "UPDATE");
  empty.extra = {{"authentication.kubernetes.io/node-name", json::array()}};
  EXPECT_FALSE(p.Admit(empty).allowed) << "an empty list is a runtime error, which denies";
}

TEST(AgentOwnNodePolicy, OtherUsersAreNotConfined) {
  Policy p = Policy::Load();
  Request op = Report("", "gpu-2", "UPDATE");
  op.user = "system:serviceaccount:gpu-guardian:gpu-guardian-operator";
  op.extra = json::object();
  EXPECT_TRUE(p.Admit(op).allowed);
  // A look-alike account in another namespace is not the agent either (RBAC confines it).
  op.user = "system:serviceaccount:default:gpu-guardian-agent";
  EXPECT_TRUE(p.Admit(op).allowed);
  // Reads and deletes are outside the policy's match (RBAC grants no delete).
  Request del = Report("gpu-1", "gpu-2", "DELETE");
  EXPECT_TRUE(p.Admit(del).allowed);
}

TEST(AgentOwnNodePolicy, OnNodesOnlyTheHealthAnnotationMayChange) {
  Policy p = Policy::Load();
  const std::string health = R"({"v":1,"nodeName":"gpu-1"})";
  auto set_health = [&](json& n) {
    n["metadata"]["annotations"]["gpuguardian.io/health"] = health;
  };
  EXPECT_TRUE(p.Admit(NodePatch("gpu-1", "gpu-1", set_health)).allowed);
  // Its own health annotation on another node: the name check denies.
  EXPECT_FALSE(p.Admit(NodePatch("gpu-1", "gpu-2", set_health)).allowed);
  // A node that had no annotations at all (the first publish).
  json bare = NodeObject("gpu-1");
  bare["metadata"].erase("annotations");
  EXPECT_TRUE(p.Admit(NodePatch("gpu-1", "gpu-1", set_health, bare)).allowed);
  // Removing its own annotation again is fine.
  json with_health = NodeObject("gpu-1");
  with_health["metadata"]["annotations"]["gpuguardian.io/health"] = health;
  EXPECT_TRUE(
      p.Admit(NodePatch(
                  "gpu-1", "gpu-1",
                  [](json& n) { n["metadata"]["annotations"].erase("gpuguardian.io/health"); },
                  with_health))
          .allowed);

  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
  } denied[] = {
      {"uncordon", [](json& n) { n["spec"]["unschedulable"] = false; }},
      {"cordon", [](json& n) { n["spec"]["unschedulable"] = true; }},
      {"remove taints", [](json& n) { n["spec"]["taints"] = json::array(); }},
      {"change a label",
       [](json& n) { n["metadata"]["labels"]["nvidia.com/gpu.present"] = "false"; }},
      {"add a label", [](json& n) { n["metadata"]["labels"]["x"] = "y"; }},
      {"drop all labels", [](json& n) { n["metadata"].erase("labels"); }},
      {"rewrite the operator's record",
       [](json& n) { n["metadata"]["annotations"]["gpuguardian.io/remediation"] = "{}"; }},
      {"delete the operator's record",
       [](json& n) { n["metadata"]["annotations"].erase("gpuguardian.io/remediation"); }},
      {"drop all annotations", [](json& n) { n["metadata"].erase("annotations"); }},
      {"add another annotation", [](json& n) { n["metadata"]["annotations"]["evil"] = "1"; }},
      {"add a finalizer",
       [](json& n) { n["metadata"]["finalizers"] = json::array({"x/block-delete"}); }},
      {"add an owner",
       [](json& n) {
         n["metadata"]["ownerReferences"] = json::array({json{{"kind", "Pod"}}});
       }},
  };
  for (const auto& c : denied) {
    Decision d = p.Admit(NodePatch("gpu-1", "gpu-1", [&](json& n) {
      set_health(n);
      c.mutate(n);
    }));
    EXPECT_FALSE(d.allowed) << c.what;
  }
}

// The evaluator itself follows CEL where the policy depends on it.
TEST(CelSubset, ErrorsAndShortCircuitsLikeCel) {
  std::map<std::string, json> vars = {{"m", {{"a", "1"}}}, {"l", {1, 2}}};
  auto eval = [&](const char* e) { return Program(e).Eval(vars); };
  EXPECT_FALSE(eval("m.b == '1'").ok()) << "a missing key is an error, not false";
  EXPECT_EQ(eval("false && m.b == '1'").v, false);
  EXPECT_EQ(eval("m.b == '1' && false").v, false) << "commutative: the error is absorbed";
  EXPECT_EQ(eval("m.b == '1' || true").v, true);
  EXPECT_FALSE(eval("m.b == '1' || false").ok());
  EXPECT_EQ(eval("has(m.a) && !has(m.b)").v, true);
  EXPECT_EQ(eval("'a' in m && !('b' in m) && 2 in l").v, true);
  EXPECT_EQ(eval("m.all(k, k == 'a')").v, true);
  EXPECT_EQ(eval("l.all(x, x > 0) && l.exists(x, x == 2) && size(l.filter(x, x > 1)) == 1").v,
            true);
  EXPECT_EQ(eval("l.all(x, x == 5 || m.zz == 1)").ok(), false);
  EXPECT_EQ(eval("l.all(x, x == 1 && m.zz == 1)").v, false) << "one false decides all()";
  EXPECT_FALSE(eval("l[5] == 1").ok());
  EXPECT_EQ(eval("'x-' + m.a").v, "x-1");
  EXPECT_EQ(eval("true ? 'y' : m.zz").v, "y");
  EXPECT_FALSE(Program("m.a ==").ok());
  EXPECT_FALSE(Program("m.a === 'b'").ok());
}

}  // namespace
}  // namespace gg::cel
