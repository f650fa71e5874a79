// Tests for OpenAPI validation, unknown fields and built-in Go rules (sim/schema.h).
#include "sim/schema.h"

#include <gtest/gtest.h>

namespace gg::sim {
namespace {

using nlohmann::json;

const SchemaSet& Builtins() {
  static const SchemaSet* set = [] {
    auto s = LoadBuiltinSchemas(OpenApiDirFor(std::string(GG_SOURCE_DIR) + "/src/sim/data", "1.35"),
                                "1.35");
    EXPECT_TRUE(s.ok()) << s.status();
    return new SchemaSet(s.ok() ? std::move(*s) : SchemaSet());
  }();
  return *set;
}

json CrdSchema() {
  return json::parse(R"({
    "type":"object",
    "properties":{
      "spec":{"type":"object","required":["effect","maxNodes"],
        "properties":{
          "effect":{"type":"string","enum":["NoSchedule","NoExecute"]},
          "maxNodes":{"type":"integer","format":"int32","minimum":1,"maximum":100},
          "name":{"type":"string","pattern":"^[a-z]+$","maxLength":5,"minLength":2},
          "budget":{"x-kubernetes-int-or-string":true},
          "rules":{"type":"array","maxItems":2,"items":{"type":"object","properties":{"xid":{"type":"integer"}}},
                   "x-kubernetes-validations":[{"rule":"self.size() > 0"}]},
          "tags":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
          "labels":{"type":"object","additionalProperties":{"type":"string"}},
          "free":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
          "opt":{"type":"string","nullable":true},
          "obj":{"type":"object","x-kubernetes-embedded-resource":true,"x-kubernetes-preserve-unknown-fields":true}}},
      "status":{"type":"object"}}})");
}

bool HasCause(const SchemaValidation& v, const std::string& reason, const std::string& field,
              const std::string& msg_part = "") {
  for (const auto& c : v.causes)
    if (c.reason == reason && c.field == field && c.message.find(msg_part) != std::string::npos)
      return true;
  return false;
}

TEST(SchemaTest, CrdStructuralValidation) {
  SchemaSet set;
  json ok = json::parse(R"({"spec":{"effect":"NoSchedule","maxNodes":3,"name":"abc","budget":"10%",
                             "rules":[{"xid":79}],"tags":["a","b"],"labels":{"x":"y"},"free":{"any":1},
                             "opt":null,"obj":{"apiVersion":"v1","kind":"Pod"}}})");
  auto v = set.Validate(ok, CrdSchema());
  EXPECT_TRUE(v.ok()) << v.causes[0].field << " " << v.causes[0].message;
  // CEL rules (x-kubernetes-validations) are the admission chain's: ValidateCelRules.
  EXPECT_TRUE(ValidateCelRules(ok, nullptr, CrdSchema()).empty());

  json bad = json::parse(R"({"spec":{"effect":"Foo","name":"ABCDEFG","budget":true,
                              "rules":[{"xid":"x"},{},{}],"tags":["a","a"],"labels":{"x":1},
                              "obj":{"kind":"Pod"}}})");
  auto b = set.Validate(bad, CrdSchema());
  EXPECT_TRUE(
      HasCause(b, "FieldValueNotSupported", "spec.effect",
               "Unsupported value: \"Foo\": supported values: \"NoSchedule\", \"NoExecute\""));
  EXPECT_TRUE(HasCause(b, "FieldValueRequired", "spec.maxNodes", "Required value"));
  EXPECT_TRUE(HasCause(b, "FieldValueTooLong", "spec.name"));
  EXPECT_TRUE(HasCause(b, "FieldValueInvalid", "spec.name", "should match '^[a-z]+$'"));
  EXPECT_TRUE(HasCause(b, "FieldValueTypeInvalid", "spec.budget"));
  EXPECT_TRUE(HasCause(b, "FieldValueTooMany", "spec.rules", "must have at most 2 items"));
  EXPECT_TRUE(HasCause(
      b, "FieldValueTypeInvalid", "spec.rules[0].xid",
      "Invalid value: \"string\": spec.rules[0].xid in body must be of type integer: \"string\""));
  EXPECT_TRUE(HasCause(b, "FieldValueDuplicate", "spec.tags[1]"));
  EXPECT_TRUE(HasCause(b, "FieldValueTypeInvalid", "spec.labels[x]"));
  EXPECT_TRUE(HasCause(b, "FieldValueRequired", "spec.obj.apiVersion"));

  auto range =
      set.Validate(json::parse(R"({"spec":{"effect":"NoExecute","maxNodes":0}})"), CrdSchema());
  EXPECT_TRUE(HasCause(range, "FieldValueInvalid", "spec.maxNodes",
                       "should be greater than or equal to 1"));
  auto big = set.Validate(json::parse(R"({"spec":{"effect":"NoExecute","maxNodes":3000000000}})"),
                          CrdSchema());
  EXPECT_TRUE(HasCause(big, "FieldValueInvalid", "spec.maxNodes"));
  auto mn = set.Validate(json::parse(R"({"spec":{"effect":"NoExecute","maxNodes":5,"name":"a"}})"),
                         CrdSchema());
  EXPECT_TRUE(HasCause(mn, "FieldValueInvalid", "spec.name", "should be at least 2 chars long"));
}

TEST(SchemaTest, UnknownFieldsForStrict) {
  SchemaSet set;
  auto u = set.UnknownFields(
      json::parse(
          R"({"apiVersion":"x","kind":"y","metadata":{"name":"a"},"spec":{"effect":"NoSchedule","bogus":1,
                     "free":{"deep":{"x":1}},"rules":[{"xid":1,"nope":2}]},"top":1})"),
      CrdSchema());
  EXPECT_EQ(u, (std::vector<std::string>{"spec.bogus", "spec.rules[0].nope", "top"}));
  EXPECT_EQ(StrictDecodingMessage({"spec.a", "b"}),
            "strict decoding error: unknown field \"spec.a\", unknown field \"b\"");
}

TEST(SchemaTest, RealDocumentsResolveAndFindUnknownFields) {
  const SchemaSet& set = Builtins();
  ASSERT_GT(set.size(), 100u);
  auto name = set.NameForGvk("", "v1", "Node");
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(*name, "io.k8s.api.core.v1.Node");
  EXPECT_EQ(set.NameForGvk("policy", "v1", "PodDisruptionBudget").value_or(""),
            "io.k8s.api.policy.v1.PodDisruptionBudget");
  EXPECT_TRUE(set.NameForGvk("resource.k8s.io", "v1alpha3", "DeviceTaintRule").has_value());
  json node = json::parse(
      R"({"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"a":"b"},"bogusMeta":1},
    "spec":{"taints":[{"key":"k","effect":"NoSchedule","extra":true}],"unschedulable":true},
    "status":{"capacity":{"nvidia.com/gpu":"8"}}})");
  auto u = set.UnknownFields(node, *set.Find(*name));
  EXPECT_EQ(u, (std::vector<std::string>{"metadata.bogusMeta", "spec.taints[0].extra"}));
  // Taint required fields from the real schema.
  auto v = set.ValidateNamed(json::parse(R"({"spec":{"taints":[{"value":"x"}]}})"),
                             "io.k8s.api.core.v1.Node");
  EXPECT_TRUE(HasCause(v, "FieldValueRequired", "spec.taints[0].key"));
  EXPECT_TRUE(HasCause(v, "FieldValueRequired", "spec.taints[0].effect"));
  EXPECT_TRUE(set.ValidateNamed(json::parse(R"({"spec":{"unschedulable":"yes"}})"),
                                "io.k8s.api.core.v1.Node")
                  .causes.size() == 1);
  // DeviceTaintRule (hand-written).
  auto dtr = set.ValidateNamed(
      json::parse(R"({"spec":{"taint":{"key":"k","effect":"PreferNoSchedule"}}})"),
      "io.k8s.api.resource.v1alpha3.DeviceTaintRule");
  EXPECT_TRUE(HasCause(dtr, "FieldValueNotSupported", "spec.taint.effect"));
}

TEST(SchemaTest, DeviceTaintRulePerRelease) {
  EXPECT_EQ(DeviceTaintRuleVersion("1.33"), "v1alpha3");
  EXPECT_EQ(DeviceTaintRuleVersion("1.36"), "v1beta2");
  SchemaSet set;
  json none = json::parse(R"({"spec":{"taint":{"key":"k","effect":"None"}}})");
  EXPECT_FALSE(set.Validate(none, DeviceTaintRuleSchema("1.34")).ok());
  EXPECT_TRUE(set.Validate(none, DeviceTaintRuleSchema("1.35")).ok());
  EXPECT_TRUE(DeviceTaintRuleSchema(
                  "1.34")["properties"]["spec"]["properties"]["deviceSelector"]["properties"]
                  .contains("selectors"));
  EXPECT_FALSE(DeviceTaintRuleSchema(
                   "1.35")["properties"]["spec"]["properties"]["deviceSelector"]["properties"]
                   .contains("selectors"));
  EXPECT_TRUE(DeviceTaintRuleSchema("1.36")["properties"].contains("status"));
}

TEST(SchemaTest, BadSchemasAndValuesDoNotCrash) {
  SchemaSet set;
  EXPECT_FALSE(set.AddDocument(json::array()).ok());
  EXPECT_FALSE(set.AddDocumentFile("/nonexistent.json").ok());
  EXPECT_FALSE(LoadBuiltinSchemas("/nonexistent", "1.35").ok());
  auto dangling =
      set.Validate(json::object(), json::parse(R"({"$ref":"#/components/schemas/nope"})"));
  EXPECT_FALSE(dangling.ok());
  auto badre = set.Validate(json("x"), json::parse(R"({"type":"string","pattern":"(["})"));
  EXPECT_FALSE(badre.ok());
  json loop = json::parse(R"({"$ref":"#/components/schemas/loop"})");
  set.AddSchema("loop", loop);
  EXPECT_FALSE(set.Validate(json::object(), loop).ok());
  EXPECT_TRUE(set.Validate(json::object(), json("not a schema")).ok());
}

TEST(BuiltinValidationTest, NodeTaints) {
  json node = json::parse(R"({"metadata":{"name":"gpu-1"},"spec":{"taints":[
    {"key":"gpuguardian.io/unhealthy","effect":"NoSchedule"},
    {"key":"bad key","value":"v","effect":"Sometimes"},
    {"key":"k","value":"bad value"},
    {"key":"gpuguardian.io/unhealthy","effect":"NoSchedule"}]}})");
  auto c = ValidateBuiltin(node, "", "v1", "Node", false);
  auto has = [&](const std::string& reason, const std::string& field, const std::string& part) {
    for (auto& x : c)
      if (x.reason == reason && x.field == field && x.message.find(part) != std::string::npos)
        return true;
    return false;
  };
  EXPECT_TRUE(has("FieldValueInvalid", "spec.taints[1].key", "name part must consist of"));
  EXPECT_TRUE(has("FieldValueNotSupported", "spec.taints[1].effect",
                  "Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", "
                  "\"PreferNoSchedule\", \"NoExecute\""));
  EXPECT_TRUE(has("FieldValueInvalid", "spec.taints[2].value", "a valid label must"));
  EXPECT_TRUE(has("FieldValueRequired", "spec.taints[2].effect", "Required value"));
  EXPECT_TRUE(
      has("FieldValueDuplicate", "spec.taints[3]", "taints must be unique by key and effect pair"));
  auto st = InvalidStatus("Node", "", "gpu-1", {c[0]});
  EXPECT_EQ(st["code"], 422);
  EXPECT_EQ(st["reason"], "Invalid");
  EXPECT_EQ(st["details"]["kind"], "Node");
  EXPECT_FALSE(st["details"].contains("group"));
  EXPECT_EQ(st["message"].get<std::string>().rfind(
                "Node \"gpu-1\" is invalid: spec.taints[1].key: Invalid value: \"bad key\"", 0),
            0u);
  EXPECT_TRUE(ValidateBuiltin(json::parse(R"({"metadata":{"name":"n"},"spec":{}})"), "", "v1",
                              "Node", false)
                  .empty());
  EXPECT_FALSE(
      ValidateBuiltin(json::parse(R"({"metadata":{"name":"N_1"}})"), "", "v1", "Node", false)
          .empty());
}

TEST(BuiltinValidationTest, Events) {
  json node_ev = json::parse(R"({"metadata":{"name":"gpu-1.17f","namespace":"default"},
    "involvedObject":{"kind":"Node","name":"gpu-1"},"reason":"GPUUnhealthy","type":"Warning"})");
  EXPECT_TRUE(ValidateBuiltin(node_ev, "", "v1", "Event", true).empty());
  json wrong_ns = node_ev;
  wrong_ns["metadata"]["namespace"] = "ml";
  auto c = ValidateBuiltin(wrong_ns, "", "v1", "Event", true);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].field, "involvedObject.namespace");
  EXPECT_EQ(c[0].message, "Invalid value: \"\": does not match event.namespace");
  json timed = node_ev;
  timed["eventTime"] = "2026-01-01T00:00:00.000000Z";
  auto t = ValidateBuiltin(timed, "", "v1", "Event", true);
  EXPECT_EQ(t.size(), 5u);  // reportingComponent (required + 2 syntax), reportingInstance, action
  json no_io = node_ev;
  no_io.erase("involvedObject");
  EXPECT_FALSE(ValidateBuiltin(no_io, "", "v1", "Event", true).empty());

  json v1 = json::parse(
      R"({"metadata":{"name":"gpu-1.17f","namespace":"default"},"eventTime":"2026-01-01T00:00:00.000000Z",
    "regarding":{"kind":"Node","name":"gpu-1"},"reason":"GPUUnhealthy","type":"Warning","action":"Taint",
    "reportingController":"gpuguardian.io/operator","reportingInstance":"op-0","note":"x"})");
  EXPECT_TRUE(ValidateBuiltin(v1, "events.k8s.io", "v1", "Event", true).empty());
  json bad = v1;
  bad["type"] = "Fatal";
  bad["deprecatedCount"] = 3;
  bad["series"] = {{"count", 1}};
  bad.erase("eventTime");
  auto b = ValidateBuiltin(bad, "events.k8s.io", "v1", "Event", true);
  std::set<std::string> fields;
  for (auto& x : b) fields.insert(x.field);
  EXPECT_TRUE(fields.count("eventTime"));
  EXPECT_TRUE(fields.count("type"));
  EXPECT_TRUE(fields.count("deprecatedCount"));
  EXPECT_TRUE(fields.count("series.count"));
  EXPECT_TRUE(fields.count("series.lastObservedTime"));
}

TEST(BuiltinValidationTest, PodsPdbsLeasesDra) {
  json pod = json::parse(
      R"({"metadata":{"name":"p","namespace":"ml"},"spec":{"containers":[{"name":"a"},{"name":"a","image":"x"}],
                           "tolerations":[{"key":"k","operator":"Exists","value":"v"},{"operator":"Sometimes","key":"x"}]}})");
  auto c = ValidateBuiltin(pod, "", "v1", "Pod", true);
  EXPECT_GE(c.size(), 4u);
  EXPECT_FALSE(
      ValidateBuiltin(json::parse(R"({"metadata":{"name":"p","namespace":"ml"},"spec":{}})"), "",
                      "v1", "Pod", true)
          .empty());
  EXPECT_TRUE(
      ValidateBuiltin(json::parse(R"({"metadata":{"name":"p","namespace":"ml"},"spec":{}})"), "",
                      "v1", "Pod", true, false)
          .empty());

  json pdb = json::parse(
      R"({"metadata":{"name":"p","namespace":"ml"},"spec":{"minAvailable":"150%","maxUnavailable":"x"}})");
  auto p = ValidateBuiltin(pdb, "policy", "v1", "PodDisruptionBudget", true);
  EXPECT_EQ(p.size(), 3u);
  EXPECT_TRUE(
      ValidateBuiltin(
          json::parse(
              R"({"metadata":{"name":"p","namespace":"ml"},"spec":{"maxUnavailable":"25%"}})"),
          "policy", "v1", "PodDisruptionBudget", true)
          .empty());
  auto l = ValidateBuiltin(
      json::parse(
          R"({"metadata":{"name":"l","namespace":"gpu-system"},"spec":{"leaseDurationSeconds":0}})"),
      "coordination.k8s.io", "v1", "Lease", true);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].field, "spec.leaseDurationSeconds");
  json dtr = json::parse(
      R"({"metadata":{"name":"r"},"spec":{"taint":{"key":"gpu.nvidia.com/xid","effect":"None"}}})");
  EXPECT_TRUE(
      ValidateBuiltin(dtr, "resource.k8s.io", "v1alpha3", "DeviceTaintRule", false, true, "1.35")
          .empty());
  auto d34 =
      ValidateBuiltin(dtr, "resource.k8s.io", "v1alpha3", "DeviceTaintRule", false, true, "1.34");
  ASSERT_EQ(d34.size(), 1u);
  EXPECT_EQ(d34[0].field, "spec.taint.effect");
  json slice =
      json::parse(R"({"metadata":{"name":"s"},"spec":{"driver":"gpu.nvidia.com","pool":{"name":"n"},
    "devices":[{"name":"gpu-0","taints":[{"key":"k","effect":"Bad"}]}]}})");
  auto s = ValidateBuiltin(slice, "resource.k8s.io", "v1", "ResourceSlice", false);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].field, "spec.devices[0].taints[0].effect");
  EXPECT_FALSE(ValidateBuiltin(json("x"), "", "v1", "Node", false).empty());
  EXPECT_FALSE(
      ValidateBuiltin(json::parse(R"({"metadata":{"name":"Bad"}})"), "", "v1", "Namespace", false)
          .empty());
}

}  // namespace
}  // namespace gg::sim
