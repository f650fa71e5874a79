// The admission chain step by step (table-driven) and through the HTTP API: pod defaults,
// QoS, Priority, CRD pruning/defaulting/CEL rules with our shipped CRDs, CRD-time CEL checks,
// and ValidatingAdmissionPolicy with the shipped agent-own-node policy.
#include "sim/admission.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <sstream>

#include "sim/api_util.h"
#include "sim/cel/cel.h"
#include "sim/schema.h"
#include "sim/server.h"
#include "sim/vap.h"

namespace gg::sim {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& rel) {
  std::ifstream in(std::string(GG_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<json> LoadAll(const std::string& rel) {
  std::vector<json> out;
  std::string text = ReadFile(rel);
  std::size_t start = 0;
  for (;;) {
    std::size_t sep = text.find("\n---", start);
    std::string doc =
        text.substr(start, sep == std::string::npos ? std::string::npos : sep - start);
    auto j = YamlToJson(doc);
    if (j.ok() && j->is_object()) out.push_back(*j);
    if (sep == std::string::npos) break;
    start = sep + 4;
  }
  return out;
}

json Load(const std::string& rel) {
  auto all = LoadAll(rel);
  return all.empty() ? json() : all[0];
}

const json& PolicyCrd() {
  static const json kCrd = Load("deploy/crds/gpuhealthpolicies.yaml");
  return kCrd;
}
const json& PolicySchema() {
  static const json kSchema = PolicyCrd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
  return kSchema;
}

// ---- pod defaults -----------------------------------------------------------------

TEST(PodDefaults, ImagePullPolicyFollowsTheTag) {
  struct {
    const char* image;
    const char* want;
  } cases[] = {
      {"busybox", "Always"},
      {"busybox:latest", "Always"},
      {"busybox:1.36", "IfNotPresent"},
      {"registry:5000/team/app", "Always"},
      {"registry:5000/team/app:v2", "IfNotPresent"},
      {"nvcr.io/nvidia/pytorch@sha256:abcd", "IfNotPresent"},
  };
  for (const auto& c : cases) {
    json spec = {{"containers", {{{"name", "c"}, {"image", c.image}}}}};
    SetPodSpecDefaults(spec, true);
    EXPECT_EQ(spec["containers"][0]["imagePullPolicy"], c.want) << c.image;
  }
}

TEST(PodDefaults, SpecAndContainerDefaultsKeepWhatIsSet) {
  json spec = {{"restartPolicy", "Never"},
               {"containers",
                {{{"name", "c"},
                  {"image", "x:1"},
                  {"ports", {{{"containerPort", 80}}}},
                  {"resources", {{"limits", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}}}}}}}},
               {"volumes", {{{"name", "s"}, {"secret", {{"secretName", "x"}}}}}}};
  SetPodSpecDefaults(spec, true);
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(spec["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(spec["schedulerName"], "default-scheduler");
  EXPECT_EQ(spec["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(spec["securityContext"], json::object());
  EXPECT_EQ(spec["enableServiceLinks"], true);
  const json& c = spec["containers"][0];
  EXPECT_EQ(c["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(c["terminationMessagePolicy"], "File");
  EXPECT_EQ(c["ports"][0]["protocol"], "TCP");
  EXPECT_EQ(c["resources"]["requests"], (json{{"cpu", "1"}, {"nvidia.com/gpu", "1"}}))
      << "requests from limits";
  EXPECT_EQ(spec["volumes"][0]["secret"]["defaultMode"], 420);
  json tmpl = {{"containers", {{{"name", "c"}, {"image", "x:1"}}}}};
  SetPodSpecDefaults(tmpl, false);
  EXPECT_FALSE(tmpl.contains("enableServiceLinks")) << "a pod-level default, not a template one";
}

TEST(PodQos, FromRequestsAndLimits) {
  auto c = [](json requests, json limits) {
    json res = json::object();
    if (!requests.is_null()) res["requests"] = requests;
    if (!limits.is_null()) res["limits"] = limits;
    return json{{"name", "c"}, {"image", "x"}, {"resources", res}};
  };
  struct {
    const char* what;
    json containers;
    const char* want;
  } cases[] = {
      {"nothing", {c(nullptr, nullptr)}, "BestEffort"},
      {"only GPUs", {c({{"nvidia.com/gpu", "1"}}, {{"nvidia.com/gpu", "1"}})}, "BestEffort"},
      {"zero requests", {c({{"cpu", "0"}}, nullptr)}, "BestEffort"},
      {"cpu request", {c({{"cpu", "500m"}}, nullptr)}, "Burstable"},
      {"equal limits",
       {c({{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "1000m"}, {"memory", "1024Mi"}})},
       "Guaranteed"},
      {"limits only (requests defaulted)",
       {c({{"cpu", "2"}, {"memory", "1G"}}, {{"cpu", "2"}, {"memory", "1G"}})},
       "Guaranteed"},
      {"no memory limit", {c({{"cpu", "1"}}, {{"cpu", "1"}})}, "Burstable"},
      {"requests below limits",
       {c({{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "2"}, {"memory", "1Gi"}})},
       "Burstable"},
      {"one of two containers unbounded",
       {c({{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "1"}, {"memory", "1Gi"}}),
        c(nullptr, nullptr)},
       "Burstable"},
  };
  for (const auto& k : cases)
    EXPECT_EQ(PodQosClass({{"containers", k.containers}}), k.want) << k.what;
}

TEST(Quantity, Parses) {
  struct {
    const char* q;
    long double want;
  } cases[] = {{"1", 1},     {"500m", 0.5L}, {"1Gi", 1073741824.0L}, {"1G", 1e9L},
               {"2k", 2000}, {"1e3", 1000},  {"0.5", 0.5L}};
  for (const auto& c : cases) {
    auto v = ParseQuantity(c.q);
    ASSERT_TRUE(v) << c.q;
    EXPECT_NEAR(static_cast<double>(*v), static_cast<double>(c.want), 1e-9) << c.q;
  }
  for (const char* bad : {"", "x", "1Q", "Gi"}) EXPECT_FALSE(ParseQuantity(bad)) << bad;
}

// ---- CRD structural schema: pruning, defaults, CEL rules --------------------------------

TEST(CrdAdmission, ShippedCrdsCompileAndFitTheCostBudget) {
  for (const char* f : {"deploy/crds/gpuhealthpolicies.yaml", "deploy/crds/gpunodehealths.yaml"}) {
    json crd = Load(f);
    ASSERT_TRUE(crd.is_object()) << f;
    auto causes = ValidateCrdValidationRules(crd);
    for (const auto& c : causes) ADD_FAILURE() << f << ": " << c.field << ": " << c.message;
  }
}

TEST(CrdAdmission, RulesThatDoNotCompileOrCostTooMuchAreRefused) {
  auto crd_with = [](json prop, json rule) {
    json crd = PolicyCrd();
    json& spec_props =
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    prop["x-kubernetes-validations"] = json::array({rule});
    spec_props["extra"] = prop;
    return crd;
  };
  json strings = {{"type", "array"}, {"items", {{"type", "string"}}}};
  struct {
    const char* what;
    json crd;
    const char* field;
    const char* message;
  } cases[] = {
      {"syntax", crd_with({{"type", "object"}}, {{"rule", "self.a =="}}),
       "spec.validation.openAPIV3Schema.properties[spec].properties[extra].x-kubernetes-"
       "validations[0].rule",
       "compilation failed: ERROR: <input>:1:10: Syntax error"},
      {"undefined field",
       crd_with({{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}},
                {{"rule", "self.b == 'x'"}}),
       "spec.validation.openAPIV3Schema.properties[spec].properties[extra].x-kubernetes-"
       "validations[0].rule",
       "compilation failed: ERROR: <input>:1:5: undefined field 'b'"},
      {"unknown function", crd_with({{"type", "string"}}, {{"rule", "self.frobnicate()"}}),
       "spec.validation.openAPIV3Schema.properties[spec].properties[extra].x-kubernetes-"
       "validations[0].rule",
       "undeclared reference to 'frobnicate'"},
      {"unbounded list of unbounded strings",
       crd_with(strings, {{"rule", "self.all(x, x.contains('gpu'))"}}),
       "spec.validation.openAPIV3Schema.properties[spec].properties[extra].x-kubernetes-"
       "validations[0].rule",
       "Forbidden: estimated rule cost exceeds budget by factor of"},
  };
  for (const auto& c : cases) {
    auto causes = ValidateCrdValidationRules(c.crd);
    ASSERT_FALSE(causes.empty()) << c.what;
    EXPECT_EQ(causes[0].field, c.field) << c.what;
    EXPECT_NE(causes[0].message.find(c.message), std::string::npos)
        << c.what << ": " << causes[0].message;
  }
  // Bounds fix it: the same rule with maxItems and maxLength.
  json bounded = strings;
  bounded["maxItems"] = 25;
  bounded["items"]["maxLength"] = 63;
  EXPECT_TRUE(
      ValidateCrdValidationRules(crd_with(bounded, {{"rule", "self.all(x, x.contains('gpu'))"}}))
          .empty());
  // Two versions with different schemas are reported per version.
  json two = crd_with({{"type", "string"}}, {{"rule", "self.nope()"}});
  json v2 = PolicyCrd()["spec"]["versions"][0];
  v2["name"] = "v1beta1";
  v2["storage"] = false;
  two["spec"]["versions"].push_back(v2);
  auto causes = ValidateCrdValidationRules(two);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field.rfind("spec.versions[0].schema.openAPIV3Schema.properties[spec]", 0),
            0u)
      << causes[0].field;
}

TEST(CrdAdmission, ObserveOnlyReadsBackWithTheSchemaDefaults) {
  json obj = Load("deploy/samples/observe-only.yaml");
  obj["spec"]["bogus"] = 1;                   // unknown: pruned
  obj["spec"]["unknown"]["alsoBogus"] = "x";  // nested unknown: pruned
  obj["spec"]["recovery"] = nullptr;          // null, not nullable, has a default: defaulted
  PruneUnknownFields(obj, PolicySchema());
  ApplyStructuralDefaults(obj, PolicySchema());
  const json& s = obj["spec"];
  EXPECT_FALSE(s.contains("bogus"));
  EXPECT_FALSE(s["unknown"].contains("alsoBogus"));
  EXPECT_EQ(s["dryRun"], true) << "set values stay";
  EXPECT_EQ(s["paused"], false);
  EXPECT_EQ(s["unknown"]["after"], "15m");
  ASSERT_TRUE(s["rules"].is_array());
  EXPECT_EQ(s["rules"].size(), 9u);
  EXPECT_EQ(s["rules"][0]["name"], "fatal-xid");
  EXPECT_EQ(s["remediation"]["taint"]["effect"], "NoSchedule") << "a default inside a default";
  EXPECT_EQ(s["remediation"]["drain"]["order"], json::parse(R"([{"priorityBelow":1000},{}])"));
  EXPECT_EQ(s["remediation"]["drain"]["timeout"], "1h");
  EXPECT_EQ(s["remediation"]["deviceLevel"], "Off");
  EXPECT_EQ(s["recovery"]["automatic"], true);
  EXPECT_EQ(s["recovery"]["healthyFor"], "10m");
  EXPECT_EQ(s["safety"]["maxUnhealthy"], "10%");
  EXPECT_EQ(s["safety"]["maxNodesPerHour"], 20);
  EXPECT_EQ(obj["metadata"]["name"], "observe-only") << "metadata is not the schema's to prune";
  // The defaulted object passes every CEL rule.
  for (const auto& c : ValidateCelRules(obj, nullptr, PolicySchema()))
    ADD_FAILURE() << c.field << ": " << c.message;
}

TEST(CrdAdmission, EveryCelRuleOfTheShippedPolicyCrdBites) {
  struct {
    const char* what;
    const char* spec;
    const char* field;
    const char* message;
  } cases[] = {
      {"two matchers in one rule",
       R"({"rules":[{"name":"r","action":"Cordon","gpuLost":true,"ecc":{"uncorrectableVolatileAbove":0}}]})",
       "spec.rules[0]", "exactly one matcher per rule"},
      {"no matcher", R"({"rules":[{"name":"r","action":"Cordon"}]})", "spec.rules[0]",
       "exactly one matcher per rule"},
      {"Xid both matched and ignored",
       R"({"rules":[{"name":"r","action":"Cordon","xid":{"codes":[79],"ignore":[79]}}]})",
       "spec.rules[0].xid", "an Xid cannot be both matched and ignored"},
      {"Xid rule naming no Xid",
       R"({"rules":[{"name":"r","action":"Cordon","xid":{"sxid":true}}]})", "spec.rules[0].xid",
       "codes or catalogActions must name at least one Xid"},
      {"window shorter than for",
       R"({"rules":[{"name":"r","action":"Cordon","xid":{"codes":[79]},"window":"1m","for":"5m"}]})",
       "spec.rules[0]", "window is shorter than for"},
      {"count on a level rule",
       R"({"rules":[{"name":"r","action":"Cordon","gpuLost":true,"count":3}]})", "spec.rules[0]",
       "count and window apply to Xid rules only"},
      {"In without values",
       R"({"nodeSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}})",
       "spec.nodeSelector.matchExpressions[0]", "In/NotIn need values"},
      {"Exists with values",
       R"({"nodeSelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}})",
       "spec.nodeSelector.matchExpressions[0]", "In/NotIn need values"},
      {"empty ecc", R"({"rules":[{"name":"r","action":"Cordon","ecc":{}}]})", "spec.rules[0].ecc",
       "set at least one threshold"},
      {"remappedRows all false",
       R"({"rules":[{"name":"r","action":"Cordon","remappedRows":{"failure":false}}]})",
       "spec.rules[0].remappedRows", "set failure, pending or uncorrectableAbove"},
      {"retiredPages empty", R"({"rules":[{"name":"r","action":"Cordon","retiredPages":{}}]})",
       "spec.rules[0].retiredPages", "set pending, dbeAbove or sbeAbove"},
      {"thermal empty",
       R"({"rules":[{"name":"r","action":"Cordon","thermal":{"throttleReasons":[]}}]})",
       "spec.rules[0].thermal", "set temperatureAboveCelsius or throttleReasons"},
      {"nvlink empty", R"({"rules":[{"name":"r","action":"Cordon","nvlink":{}}]})",
       "spec.rules[0].nvlink", "set linksDownAbove or errorsAbove"},
      {"catch-all drain step not last",
       R"({"remediation":{"drain":{"order":[{},{"priorityBelow":10}]}}})",
       "spec.remediation.drain.order",
       "a step without priorityBelow (the rest) must be the last one"},
      {"quarantine within 0s", R"({"recovery":{"quarantine":{"after":3,"within":"0s"}}})",
       "spec.recovery.quarantine", "quarantine.within must be positive"},
  };
  for (const auto& c : cases) {
    json obj = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                {"kind", "GPUHealthPolicy"},
                {"metadata", {{"name", "p"}}},
                {"spec", json::parse(c.spec)}};
    ApplyStructuralDefaults(obj, PolicySchema());
    auto causes = ValidateCelRules(obj, nullptr, PolicySchema());
    ASSERT_EQ(causes.size(), 1u) << c.what;
    EXPECT_EQ(causes[0].field, c.field) << c.what;
    EXPECT_EQ(causes[0].message.rfind("Invalid value: \"", 0), 0u) << causes[0].message;
    EXPECT_NE(causes[0].message.find(c.message), std::string::npos)
        << c.what << ": " << causes[0].message;
  }
  for (const char* sample :
       {"deploy/samples/default-policy.yaml", "deploy/samples/observe-only.yaml",
        "deploy/samples/aggressive-training.yaml", "deploy/samples/batch-before-inference.yaml",
        "deploy/samples/npd-xid-conditions.yaml"}) {
    json obj = Load(sample);
    ApplyStructuralDefaults(obj, PolicySchema());
    for (const auto& c : ValidateCelRules(obj, nullptr, PolicySchema()))
      ADD_FAILURE() << sample << ": " << c.field << ": " << c.message;
  }
}

// The CEL rules of drain.order podSelector stages, nodeCondition, power and the correctable-ECC
// rate: each wrong spec fails exactly its rule; the right ones pass.
TEST(CrdAdmission, SignalAndDrainOrderRulesBite) {
  struct {
    const char* what;
    const char* spec;
    const char* field;  // "" = valid
    const char* message;
  } cases[] = {
      {"selector stage, then the rest",
       R"({"remediation":{"drain":{"order":[{"podSelector":{"matchLabels":{"w":"batch"}}},{}]}}})",
       "", ""},
      {"the rest before a selector stage",
       R"({"remediation":{"drain":{"order":[{},{"podSelector":{"matchLabels":{"w":"batch"}}}]}}})",
       "spec.remediation.drain.order", "must be the last one"},
      {"selector expression without values",
       R"({"remediation":{"drain":{"order":[{"podSelector":{"matchExpressions":[{"key":"w","operator":"In"}]}}]}}})",
       "spec.remediation.drain.order[0].podSelector.matchExpressions[0]", "In/NotIn need values"},
      {"nodeCondition",
       R"({"rules":[{"name":"r","action":"Cordon","nodeCondition":{"type":"GPUXidFatal"}}]})", "",
       ""},
      {"nodeCondition on GPUHealthy",
       R"({"rules":[{"name":"r","action":"Cordon","nodeCondition":{"type":"GPUHealthy","status":"False"}}]})",
       "spec.rules[0].nodeCondition", "operator's own verdict"},
      {"kubelet pressure condition False",
       R"({"rules":[{"name":"r","action":"Cordon","nodeCondition":{"type":"DiskPressure","status":"False"}}]})",
       "spec.rules[0].nodeCondition", "False on every healthy node"},
      {"Ready (True by default)",
       R"({"rules":[{"name":"r","action":"Cordon","nodeCondition":{"type":"Ready"}}]})",
       "spec.rules[0].nodeCondition", "Ready is True on every healthy node"},
      {"Ready False",
       R"({"rules":[{"name":"r","action":"Cordon","nodeCondition":{"type":"Ready","status":"False"}}]})",
       "", ""},
      {"nodeCondition and power in one rule",
       R"({"rules":[{"name":"r","action":"Cordon","nodeCondition":{"type":"X"},"power":{}}]})",
       "spec.rules[0]", "exactly one matcher per rule"},
      {"power with for",
       R"({"rules":[{"name":"r","action":"Taint","power":{"overLimitPercent":5},"for":"5m"}]})", "",
       ""},
      {"power with a window",
       R"({"rules":[{"name":"r","action":"Taint","power":{},"window":"5m"}]})", "spec.rules[0]",
       "count and window apply to Xid rules only"},
      {"ECC rate with its window",
       R"({"rules":[{"name":"r","action":"Taint","ecc":{"correctableVolatileIncreaseAbove":100},"window":"1h"}]})",
       "", ""},
      {"ECC rate without a window",
       R"({"rules":[{"name":"r","action":"Taint","ecc":{"correctableVolatileIncreaseAbove":100}}]})",
       "spec.rules[0]", "counts within a window"},
  };
  for (const auto& c : cases) {
    json obj = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                {"kind", "GPUHealthPolicy"},
                {"metadata", {{"name", "p"}}},
                {"spec", json::parse(c.spec)}};
    ApplyStructuralDefaults(obj, PolicySchema());
    auto causes = ValidateCelRules(obj, nullptr, PolicySchema());
    if (std::string(c.field).empty()) {
      for (const auto& cause : causes)
        ADD_FAILURE() << c.what << ": " << cause.field << ": " << cause.message;
      continue;
    }
    ASSERT_EQ(causes.size(), 1u) << c.what;
    EXPECT_EQ(causes[0].field, c.field) << c.what;
    EXPECT_NE(causes[0].message.find(c.message), std::string::npos)
        << c.what << ": " << causes[0].message;
  }
}

TEST(CrdAdmission, TransitionRulesMessagesAndReasons) {
  json schema = {
      {"type", "object"},
      {"properties",
       {{"spec",
         {{"type", "object"},
          {"properties",
           {{"mode",
             {{"type", "string"},
              {"x-kubernetes-validations",
               {{{"rule", "self == oldSelf"}, {"message", "mode is immutable"}}}}}},
            {"size", {{"type", "integer"}}},
            {"items",
             {{"type", "array"},
              {"x-kubernetes-list-type", "map"},
              {"x-kubernetes-list-map-keys", {"k"}},
              {"items",
               {{"type", "object"},
                {"properties", {{"k", {{"type", "string"}}}, {"v", {{"type", "integer"}}}}},
                {"x-kubernetes-validations",
                 {{{"rule", "self.v >= oldSelf.v"}, {"message", "v may only grow"}}}}}}}}}},
          {"x-kubernetes-validations",
           {{{"rule", "self.size < 10"},
             {"messageExpression", "'size ' + string(self.size) + ' is too big'"},
             {"reason", "FieldValueForbidden"},
             {"fieldPath", ".size"}}}}}}}}};
  json v1 = {{"spec", {{"mode", "a"}, {"size", 1}, {"items", {{{"k", "x"}, {"v", 2}}}}}}};
  EXPECT_TRUE(ValidateCelRules(v1, nullptr, schema).empty()) << "transition rules skip on create";
  json v2 = v1;
  v2["spec"]["mode"] = "b";
  v2["spec"]["size"] = 12;
  v2["spec"]["items"] = {{{"k", "x"}, {"v", 1}}, {{"k", "new"}, {"v", 0}}};
  auto causes = ValidateCelRules(v2, &v1, schema);
  ASSERT_EQ(causes.size(), 3u);
  std::map<std::string, std::string> by_field;
  for (const auto& c : causes) by_field[c.field] = c.message;
  EXPECT_EQ(by_field["spec.size"], "Forbidden: size 12 is too big");
  EXPECT_EQ(by_field["spec.mode"], "Invalid value: \"string\": mode is immutable");
  EXPECT_EQ(by_field["spec.items[0]"], "Invalid value: \"object\": v may only grow")
      << "list-type map items correlate by key; the new item has no old value";
}

// ---- ValidatingAdmissionPolicy objects ------------------------------------------------

TEST(VapObjects, ShippedPolicyAndBindingValidate) {
  auto docs = LoadAll("deploy/admission/agent-own-node.yaml");
  ASSERT_EQ(docs.size(), 2u);
  for (const auto& d : docs)
    for (const auto& c : ValidateVapObject(d, d["kind"]))
      ADD_FAILURE() << c.field << ": " << c.message;
  struct {
    const char* what;
    const char* kind;
    const char* spec;
    const char* field;
  } bad[] = {
      {"no actions", "ValidatingAdmissionPolicyBinding",
       R"({"policyName":"p","validationActions":[]})", "spec.validationActions"},
      {"Deny and Warn", "ValidatingAdmissionPolicyBinding",
       R"({"policyName":"p","validationActions":["Deny","Warn"]})", "spec.validationActions"},
      {"unknown action", "ValidatingAdmissionPolicyBinding",
       R"({"policyName":"p","validationActions":["Block"]})", "spec.validationActions[0]"},
      {"no policy name", "ValidatingAdmissionPolicyBinding", R"({"validationActions":["Deny"]})",
       "spec.policyName"},
      {"expression does not compile", "ValidatingAdmissionPolicy",
       R"({"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["UPDATE"],"resources":["nodes"]}]},
           "validations":[{"expression":"object.metadata.name =="}]})",
       "spec.validations[0].expression"},
      {"undeclared variable", "ValidatingAdmissionPolicy",
       R"({"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["UPDATE"],"resources":["nodes"]}]},
           "validations":[{"expression":"self.x == 1"}]})",
       "spec.validations[0].expression"},
      {"no validations", "ValidatingAdmissionPolicy",
       R"({"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["UPDATE"],"resources":["nodes"]}]}})",
       "spec.validations"},
      {"no match constraints", "ValidatingAdmissionPolicy",
       R"({"validations":[{"expression":"true"}]})", "spec.matchConstraints"},
  };
  for (const auto& b : bad) {
    auto causes = ValidateVapObject({{"spec", json::parse(b.spec)}}, b.kind);
    ASSERT_FALSE(causes.empty()) << b.what;
    EXPECT_EQ(causes[0].field, b.field) << b.what << ": " << causes[0].message;
  }
}

// Matching and evaluation of one policy + binding against requests, table-driven.
TEST(VapEngine, MatchingFailurePolicyAndReasons) {
  auto policy = [](json spec) {
    return json{{"apiVersion", "admissionregistration.k8s.io/v1"},
                {"kind", "ValidatingAdmissionPolicy"},
                {"metadata", {{"name", "p"}}},
                {"spec", spec}};
  };
  auto binding = [](json spec) {
    spec["policyName"] = "p";
    if (!spec.contains("validationActions")) spec["validationActions"] = {"Deny"};
    return json{{"metadata", {{"name", "b"}}}, {"spec", spec}};
  };
  const json rules = json::parse(
      R"({"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["UPDATE"],"resources":["nodes","pods/status"]}]})");
  const json deny_all = json::parse(R"([{"expression":"false","message":"no"}])");
  json node = {{"metadata", {{"name", "n1"}, {"labels", {{"tier", "gpu"}}}}},
               {"spec", json::object()}};
  json ns_obj = {{"metadata", {{"name", "ml"}, {"labels", {{"team", "ml"}}}}}};
  struct Case {
    const char* what;
    json pspec, bspec;
    std::string resource, sub, op;
    bool namespaced;
    int want_code;  // 0: allowed
    const char* want_message;
  };
  auto with = [&](json extra) {
    json s = {{"matchConstraints", rules}, {"validations", deny_all}};
    for (auto it = extra.begin(); it != extra.end(); ++it) s[it.key()] = *it;
    return s;
  };
  std::vector<Case> cases = {
      {"matching update denied",
       with({}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       422,
       "denied request: no"},
      {"create not matched", with({}), {}, "nodes", "", "CREATE", false, 0, ""},
      {"subresource needs its own rule", with({}), {}, "nodes", "status", "UPDATE", false, 0, ""},
      {"pods/status matched", with({}), {}, "pods", "status", "UPDATE", true, 422, ""},
      {"pods main resource not matched", with({}), {}, "pods", "", "UPDATE", true, 0, ""},
      {"excludeResourceRules",
       with({{"matchConstraints",
              {{"resourceRules", rules["resourceRules"]},
               {"excludeResourceRules",
                {{{"apiGroups", {""}},
                  {"apiVersions", {"*"}},
                  {"operations", {"*"}},
                  {"resources", {"nodes"}}}}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       0,
       ""},
      {"objectSelector miss",
       with({{"matchConstraints",
              {{"resourceRules", rules["resourceRules"]},
               {"objectSelector", {{"matchLabels", {{"tier", "cpu"}}}}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       0,
       ""},
      {"objectSelector hit",
       with({{"matchConstraints",
              {{"resourceRules", rules["resourceRules"]},
               {"objectSelector", {{"matchLabels", {{"tier", "gpu"}}}}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       422,
       ""},
      {"namespaceSelector ignores cluster-scoped",
       with({{"matchConstraints",
              {{"resourceRules", rules["resourceRules"]},
               {"namespaceSelector", {{"matchLabels", {{"team", "other"}}}}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       422,
       ""},
      {"namespaceSelector miss",
       with({{"matchConstraints",
              {{"resourceRules", rules["resourceRules"]},
               {"namespaceSelector", {{"matchLabels", {{"team", "other"}}}}}}}}),
       {},
       "pods",
       "status",
       "UPDATE",
       true,
       0,
       ""},
      {"binding matchResources narrows",
       with({}),
       {{"matchResources",
         {{"resourceRules",
           {{{"apiGroups", {""}},
             {"apiVersions", {"v1"}},
             {"operations", {"UPDATE"}},
             {"resources", {"pods/status"}}}}}}}},
       "nodes",
       "",
       "UPDATE",
       false,
       0,
       ""},
      {"matchCondition false skips",
       with({{"matchConditions", {{{"name", "never"}, {"expression", "false"}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       0,
       ""},
      {"runtime error, Fail",
       with({{"validations", {{{"expression", "object.nope == 1"}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       422,
       "expression 'object.nope == 1' resulted in error: no such key: nope"},
      {"runtime error, Ignore",
       with({{"failurePolicy", "Ignore"}, {"validations", {{{"expression", "object.nope == 1"}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       0,
       ""},
      {"reason Forbidden is 403",
       with({{"validations", {{{"expression", "false"}, {"reason", "Forbidden"}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       403,
       "failed expression: false"},
      {"variables and messageExpression",
       with({{"variables", {{{"name", "tier"}, {"expression", "object.metadata.labels.tier"}}}},
             {"validations",
              {{{"expression", "variables.tier != 'gpu'"},
                {"messageExpression", "'tier ' + variables.tier"}}}}}),
       {},
       "nodes",
       "",
       "UPDATE",
       false,
       422,
       "denied request: tier gpu"},
      {"Audit only",
       with({}),
       {{"validationActions", {"Audit"}}},
       "nodes",
       "",
       "UPDATE",
       false,
       0,
       ""},
  };
  for (const auto& c : cases) {
    VapEngine e;
    json p = policy(c.pspec), b = binding(c.bspec);
    e.Observe("ValidatingAdmissionPolicy", "p", &p);
    e.Observe("ValidatingAdmissionPolicyBinding", "b", &b);
    VapRequest r;
    r.operation = c.op;
    r.version = "v1";
    r.resource = c.resource;
    r.subresource = c.sub;
    r.name = "n1";
    r.namespaced = c.namespaced;
    r.ns = c.namespaced ? "ml" : "";
    r.object = &node;
    r.old_object = &node;
    if (c.namespaced) r.namespace_object = &ns_obj;
    VapDecision d = e.Evaluate(r);
    if (c.want_code == 0) {
      EXPECT_FALSE(d.deny) << c.what << ": " << (d.deny ? d.deny->message : "");
      continue;
    }
    ASSERT_TRUE(d.deny) << c.what;
    EXPECT_EQ(d.deny->code, c.want_code) << c.what;
    EXPECT_NE(
        d.deny->message.find("ValidatingAdmissionPolicy 'p' with binding 'b' denied request: "),
        std::string::npos)
        << d.deny->message;
    EXPECT_NE(d.deny->message.find(c.want_message), std::string::npos)
        << c.what << ": " << d.deny->message;
  }
}

// ---- through the API server ------------------------------------------------------------

struct Reply {
  int code = 0;
  json body;
  std::string warning;
};

class AdmissionServerTest : public ::testing::Test {
 protected:
  void Start(SimOptions o) {
    o.scheduler = false;
    o.kubelet = false;
    o.controllers = false;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
  }
  void SetUp() override { Start(SimOptions{}); }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }
  Reply Do(const std::string& method, const std::string& path, const json& body = nullptr,
           const std::string& token = "", const std::string& ct = "application/json") {
    httplib::Client cli(sim_->Url());
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    httplib::Result r{nullptr, httplib::Error::Unknown};
    std::string b = body.is_null() ? "" : body.dump();
    if (method == "GET") r = cli.Get(path, h);
    if (method == "POST") r = cli.Post(path, h, b, ct);
    if (method == "PUT") r = cli.Put(path, h, b, ct);
    if (method == "PATCH") r = cli.Patch(path, h, b, ct);
    Reply out;
    if (!r) return out;
    out.code = r->status;
    out.body = json::parse(r->body, nullptr, false);
    out.warning = r->get_header_value("Warning");
    return out;
  }
  static json Pod(const std::string& name, json spec_extra = json::object()) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    for (auto it = spec_extra.begin(); it != spec_extra.end(); ++it) p["spec"][it.key()] = *it;
    return p;
  }
  std::unique_ptr<SimServer> sim_;
};

TEST_F(AdmissionServerTest, PodsGetDefaultsPriorityTolerationsAndQos) {
  const std::string pods = "/api/v1/namespaces/default/pods";
  // The system classes exist as on a real server.
  auto pc = Do("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical");
  ASSERT_EQ(pc.code, 200) << pc.body;
  EXPECT_EQ(pc.body["value"], 2000001000);
  EXPECT_EQ(
      Do("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/system-cluster-critical").body["value"],
      2000000000);

  auto r = Do("POST", pods, Pod("plain"));
  ASSERT_EQ(r.code, 201) << r.body;
  const json& s = r.body["spec"];
  EXPECT_EQ(s["priority"], 0) << "no class, no global default";
  EXPECT_EQ(s["preemptionPolicy"], "PreemptLowerPriority");
  EXPECT_EQ(s["serviceAccountName"], "default");
  EXPECT_EQ(s["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(s["containers"][0]["imagePullPolicy"], "Always");
  EXPECT_EQ(r.body["status"]["qosClass"], "BestEffort");
  json tol_keys = json::array();
  for (const auto& t : s["tolerations"]) {
    EXPECT_EQ(t["effect"], "NoExecute");
    EXPECT_EQ(t["tolerationSeconds"], 300);
    tol_keys.push_back(t["key"]);
  }
  EXPECT_EQ(tol_keys,
            json::array({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}));

  r = Do("POST", pods,
         Pod("critical", {{"priorityClassName", "system-node-critical"},
                          {"tolerations", {{{"operator", "Exists"}}}},
                          {"containers",
                           {{{"name", "c"},
                             {"image", "x:1"},
                             {"resources", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}}}}));
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(r.body["spec"]["priority"], 2000001000);
  EXPECT_EQ(r.body["spec"]["tolerations"].size(), 1u)
      << "tolerating everything already covers both";
  EXPECT_EQ(r.body["status"]["qosClass"], "Guaranteed");

  r = Do("POST", pods, Pod("lost", {{"priorityClassName", "no-such-class"}}));
  EXPECT_EQ(r.code, 403);
  EXPECT_EQ(r.body["message"],
            "pods \"lost\" is forbidden: no PriorityClass with name no-such-class was found");
  EXPECT_EQ(Do("GET", pods + "/lost").code, 404) << "nothing stored";

  r = Do("POST", pods,
         Pod("forged", {{"priorityClassName", "system-node-critical"}, {"priority", 5}}));
  EXPECT_EQ(r.code, 403);
  EXPECT_NE(r.body.value("message", "").find("must not be provided in pod spec"), std::string::npos)
      << r.body;

  // A globalDefault class applies to pods without a class; only one default may exist.
  r = Do("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
         {{"metadata", {{"name", "batch-default"}}}, {"value", 100}, {"globalDefault", true}});
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(r.body["preemptionPolicy"], "PreemptLowerPriority");
  r = Do("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
         {{"metadata", {{"name", "second-default"}}}, {"value", 50}, {"globalDefault", true}});
  EXPECT_EQ(r.code, 403) << r.body;
  EXPECT_NE(
      r.body.value("message", "").find("PriorityClass batch-default is already marked as default"),
      std::string::npos);
  r = Do("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
         {{"metadata", {{"name", "system-mine"}}}, {"value", 1}});
  EXPECT_EQ(r.code, 422) << r.body;
  r = Do("POST", pods, Pod("defaulted"));
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(r.body["spec"]["priorityClassName"], "batch-default");
  EXPECT_EQ(r.body["spec"]["priority"], 100);
}

TEST_F(AdmissionServerTest, ShippedCrdRefusesABrokenPolicyAndDefaultsAnEmptyOne) {
  for (const char* f : {"deploy/crds/gpuhealthpolicies.yaml", "deploy/crds/gpunodehealths.yaml"}) {
    auto r = Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", Load(f));
    ASSERT_EQ(r.code, 201) << f << ": " << r.body;
  }
  const std::string col = "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies";
  auto r = Do("POST", col,
              json::parse(R"({"apiVersion":"gpuguardian.io/v1alpha1","kind":"GPUHealthPolicy",
      "metadata":{"name":"bad"},"spec":{"rules":[{"name":"x","action":"Cordon","xid":{"codes":[79],"ignore":[79]}}]}})"));
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_NE(r.body.value("message", "")
                .find("spec.rules[0].xid: Invalid value: \"object\": an Xid cannot be both matched "
                      "and ignored"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Do("GET", col + "/bad").code, 404);
  r = Do("POST", col,
         json::parse(R"({"apiVersion":"gpuguardian.io/v1alpha1","kind":"GPUHealthPolicy",
      "metadata":{"name":"empty"},"spec":{"surplus":true}})"));
  ASSERT_EQ(r.code, 201) << r.body;
  auto got = Do("GET", col + "/empty");
  EXPECT_FALSE(got.body["spec"].contains("surplus")) << "pruned";
  EXPECT_EQ(got.body["spec"]["rules"].size(), 9u);
  EXPECT_EQ(got.body["spec"]["nodeSelector"],
            json::parse(R"({"matchLabels":{"nvidia.com/gpu.present":"true"}})"));
  // An update that breaks a rule is refused too; a merge patch keeps the defaults.
  r = Do("PATCH", col + "/empty",
         json::parse(R"({"spec":{"remediation":{"drain":{"order":[{},{"priorityBelow":5}]}}}})"),
         "", "application/merge-patch+json");
  EXPECT_EQ(r.code, 422) << r.body;
  // A CRD whose rule does not compile is refused at creation.
  json crd = Load("deploy/crds/gpunodehealths.yaml");
  crd["metadata"]["name"] = "widgets.example.io";
  crd["spec"]["group"] = "example.io";
  crd["spec"]["names"] = {{"plural", "widgets"}, {"kind", "Widget"}};
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["x-kubernetes-validations"] = {
      {{"rule", "self.spec.nope == 1"}}};
  r = Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_NE(r.body.value("message", "")
                .find("compilation failed: ERROR: <input>:1:10: undefined field 'nope'"),
            std::string::npos)
      << r.body;
}

// deploy/admission/agent-own-node.yaml with the agent's RBAC and pod-bound tokens: an agent
// may patch its own node's health annotation and nothing on another node.
TEST_F(AdmissionServerTest, AgentOwnNodePolicyConfinesTheAgent) {
  SimOptions o;
  o.authz = "rbac";
  o.rbac_files = {std::string(GG_SOURCE_DIR) + "/deploy/rbac/agent.yaml"};
  const std::string agent = "system:serviceaccount:gpu-guardian:gpu-guardian-agent";
  o.token_users = {{"agent-n1", agent + ",node=gpu-node-1"}, {"agent-legacy", agent}};
  sim_->Stop();
  Start(o);
  for (const char* n : {"gpu-node-1", "gpu-node-2"})
    ASSERT_EQ(Do("POST", "/api/v1/nodes", {{"metadata", {{"name", n}, {"labels", {{"a", "b"}}}}}},
                 "admin")
                  .code,
              201);
  for (const auto& d : LoadAll("deploy/admission/agent-own-node.yaml")) {
    std::string res = d["kind"] == "ValidatingAdmissionPolicy"
                          ? "validatingadmissionpolicies"
                          : "validatingadmissionpolicybindings";
    auto r = Do("POST", "/apis/admissionregistration.k8s.io/v1/" + res, d, "admin");
    ASSERT_EQ(r.code, 201) << r.body;
  }
  const std::string mp = "application/merge-patch+json";
  json health = {{"metadata", {{"annotations", {{"gpuguardian.io/health", "{\"v\":1}"}}}}}};
  auto r = Do("PATCH", "/api/v1/nodes/gpu-node-1", health, "agent-n1", mp);
  EXPECT_EQ(r.code, 200) << r.body;
  r = Do("PATCH", "/api/v1/nodes/gpu-node-2", health, "agent-n1", mp);
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_EQ(r.body["reason"], "Invalid");
  EXPECT_EQ(r.body["message"],
            "nodes \"gpu-node-2\" is forbidden: ValidatingAdmissionPolicy "
            "'gpu-guardian-agent-own-node' with binding "
            "'gpu-guardian-agent-own-node' denied request: gpu-guardian-agent may only write "
            "objects of its own node, "
            "not gpu-node-2");
  EXPECT_FALSE(Do("GET", "/api/v1/nodes/gpu-node-2", nullptr, "admin")
                   .body["metadata"]
                   .contains("annotations"));
  r = Do("PATCH", "/api/v1/nodes/gpu-node-1", {{"metadata", {{"labels", {{"a", "c"}}}}}},
         "agent-n1", mp);
  EXPECT_EQ(r.code, 422) << "own node, but a label: " << r.body;
  r = Do("PATCH", "/api/v1/nodes/gpu-node-1", health, "agent-legacy", mp);
  EXPECT_EQ(r.code, 422) << "a token without a node binding fails closed: " << r.body;
  r = Do("PATCH", "/api/v1/nodes/gpu-node-2", {{"metadata", {{"labels", {{"a", "d"}}}}}}, "admin",
         mp);
  EXPECT_EQ(r.code, 200) << "other users are not confined: " << r.body;
  // A policy that does not compile is refused at creation.
  json broken = LoadAll("deploy/admission/agent-own-node.yaml")[0];
  broken["metadata"]["name"] = "broken";
  broken["spec"]["validations"][0]["expression"] = "request.name ==";
  r = Do("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", broken,
         "admin");
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_NE(r.body.value("message", "")
                .find("spec.validations[0].expression: Invalid value: \"request.name ==\": "
                      "compilation failed: ERROR: <input>:1:16:"),
            std::string::npos)
      << r.body;
}

// The agent's heartbeat Lease under deploy/rbac/agent.yaml and deploy/admission: an agent
// creates and renews gpu-guardian-agent-<its node>, never another node's, nor one naming
// another holder.
TEST_F(AdmissionServerTest, AgentOwnNodePolicyConfinesTheAgentsLease) {
  SimOptions o;
  o.authz = "rbac";
  o.rbac_files = {std::string(GG_SOURCE_DIR) + "/deploy/rbac/agent.yaml"};
  const std::string agent = "system:serviceaccount:gpu-guardian:gpu-guardian-agent";
  o.token_users = {{"agent-n1", agent + ",node=gpu-node-1"},
                   {"agent-n2", agent + ",node=gpu-node-2"}};
  sim_->Stop();
  Start(o);
  ASSERT_EQ(
      Do("POST", "/api/v1/namespaces", {{"metadata", {{"name", "gpu-guardian"}}}}, "admin").code,
      201);
  for (const auto& d : LoadAll("deploy/admission/agent-own-node.yaml")) {
    std::string res = d["kind"] == "ValidatingAdmissionPolicy"
                          ? "validatingadmissionpolicies"
                          : "validatingadmissionpolicybindings";
    ASSERT_EQ(Do("POST", "/apis/admissionregistration.k8s.io/v1/" + res, d, "admin").code, 201);
  }
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/gpu-guardian/leases";
  auto lease = [](const std::string& node, const std::string& holder) {
    return json{
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", "gpu-guardian-agent-" + node}, {"namespace", "gpu-guardian"}}},
        {"spec", {{"holderIdentity", holder}, {"renewTime", "2026-01-01T00:00:00.000000Z"}}}};
  };
  EXPECT_EQ(Do("POST", leases, lease("gpu-node-1", "gpu-node-1"), "agent-n1").code, 201);
  auto r = Do("POST", leases, lease("gpu-node-2", "gpu-node-2"), "agent-n1");
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_NE(r.body.value("message", "")
                .find("may only write objects of its own node, not gpu-guardian-agent-gpu-node-2"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Do("POST", leases, lease("gpu-node-2", "gpu-node-2"), "agent-n2").code, 201);
  // Renewing node 2's Lease as node 1's agent: refused, and the Lease keeps what node 2 wrote.
  json other = Do("GET", leases + "/gpu-guardian-agent-gpu-node-2", nullptr, "admin").body;
  other["spec"]["renewTime"] = "2026-01-01T00:05:00.000000Z";
  r = Do("PUT", leases + "/gpu-guardian-agent-gpu-node-2", other, "agent-n1");
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_EQ(Do("GET", leases + "/gpu-guardian-agent-gpu-node-2", nullptr, "admin")
                .body["spec"]["renewTime"],
            "2026-01-01T00:00:00.000000Z");
  // Its own Lease naming another holder is refused too; its own renew passes.
  json own = Do("GET", leases + "/gpu-guardian-agent-gpu-node-1", nullptr, "admin").body;
  own["spec"]["holderIdentity"] = "gpu-node-2";
  EXPECT_EQ(Do("PUT", leases + "/gpu-guardian-agent-gpu-node-1", own, "agent-n1").code, 422);
  own["spec"]["holderIdentity"] = "gpu-node-1";
  own["spec"]["renewTime"] = "2026-01-01T00:05:00.000000Z";
  EXPECT_EQ(Do("PUT", leases + "/gpu-guardian-agent-gpu-node-1", own, "agent-n1").code, 200);
  // RBAC grants no delete and no list.
  httplib::Client cli(sim_->Url());
  auto del =
      cli.Delete(leases + "/gpu-guardian-agent-gpu-node-2", {{"Authorization", "Bearer agent-n1"}});
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 403) << del->body;
  EXPECT_EQ(Do("GET", leases, nullptr, "agent-n1").code, 403);
}

TEST_F(AdmissionServerTest, PolicyOnDeleteSeesTheOldObject) {
  json policy = json::parse(R"J({"metadata":{"name":"keep-protected"},
    "spec":{"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["DELETE"],"resources":["nodes"]}]},
            "validations":[{"expression":"object == null && !(has(oldObject.metadata.labels) && 'protected' in oldObject.metadata.labels)",
                            "message":"protected nodes stay","reason":"Forbidden"}]}})J");
  ASSERT_EQ(
      Do("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy).code,
      201);
  ASSERT_EQ(Do("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
               {{"metadata", {{"name", "keep-protected"}}},
                {"spec", {{"policyName", "keep-protected"}, {"validationActions", {"Deny"}}}}})
                .code,
            201);
  ASSERT_EQ(Do("POST", "/api/v1/nodes",
               {{"metadata", {{"name", "keep"}, {"labels", {{"protected", "yes"}}}}}})
                .code,
            201);
  ASSERT_EQ(Do("POST", "/api/v1/nodes", {{"metadata", {{"name", "drop"}}}}).code, 201);
  httplib::Client cli(sim_->Url());
  auto r = cli.Delete("/api/v1/nodes/keep");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_NE(r->body.find("denied request: protected nodes stay"), std::string::npos) << r->body;
  EXPECT_EQ(Do("GET", "/api/v1/nodes/keep").code, 200);
  r = cli.Delete("/api/v1/nodes/drop");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(AdmissionServerTest, WarnAndAuditActionsDoNotDeny) {
  json policy = json::parse(
      R"({"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy",
    "metadata":{"name":"labels-required"},
    "spec":{"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],"resources":["configmaps"]}],
                                "namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"default"}}},
            "variables":[{"name":"team","expression":"has(object.metadata.labels) && 'team' in object.metadata.labels ? object.metadata.labels.team : ''"}],
            "validations":[{"expression":"variables.team != ''","messageExpression":"'configmap ' + object.metadata.name + ' has no team'"}]}})");
  ASSERT_EQ(
      Do("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy).code,
      201);
  json binding = {
      {"metadata", {{"name", "labels-required"}}},
      {"spec", {{"policyName", "labels-required"}, {"validationActions", {"Warn", "Audit"}}}}};
  ASSERT_EQ(
      Do("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", binding)
          .code,
      201);
  auto r = Do("POST", "/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "cm1"}}}});
  EXPECT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(r.warning,
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'labels-required' with "
            "binding 'labels-required': "
            "configmap cm1 has no team\"");
  // Now Deny: the same request is refused; a labelled one passes; another namespace is not matched.
  binding["spec"]["validationActions"] = {"Deny"};
  ASSERT_EQ(
      Do("PUT",
         "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/labels-required",
         [&] {
           json b = Do("GET",
                       "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"
                       "labels-required")
                        .body;
           b["spec"] = binding["spec"];
           return b;
         }())
          .code,
      200);
  r = Do("POST", "/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "cm2"}}}});
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_TRUE(r.warning.empty());
  r = Do("POST", "/api/v1/namespaces/default/configmaps",
         {{"metadata", {{"name", "cm3"}, {"labels", {{"team", "ml"}}}}}});
  EXPECT_EQ(r.code, 201) << r.body;
  r = Do("POST", "/api/v1/namespaces/kube-system/configmaps", {{"metadata", {{"name", "cm4"}}}});
  EXPECT_EQ(r.code, 201) << "namespaceSelector: " << r.body;
}

}  // namespace
}  // namespace gg::sim
