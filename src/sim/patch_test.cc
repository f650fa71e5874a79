// Tests for merge / JSON / strategic merge patch (sim/patch.h).
#include "sim/patch.h"

#include <gtest/gtest.h>

namespace gg::sim {
namespace {

using nlohmann::json;

TEST(MergePatchTest, Rfc7386Semantics) {
  json obj = json::parse(R"({"a":"b","c":{"d":"e","f":"g"},"l":[1,2]})");
  auto r = ApplyMergePatch(obj, json::parse(R"({"a":"z","c":{"f":null},"l":[3],"n":{"x":null}})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, json::parse(R"({"a":"z","c":{"d":"e"},"l":[3],"n":{}})"));
}

TEST(MergePatchTest, LabelsAddAndRemove) {
  json node = {{"metadata", {{"name", "n"}, {"labels", {{"a", "1"}, {"b", "2"}}}}}};
  auto r = ApplyMergePatch(node, json::parse(R"({"metadata":{"labels":{"a":null,"c":"3"}}})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["metadata"]["labels"], json::parse(R"({"b":"2","c":"3"})"));
}

TEST(MergePatchTest, NonObjectPatchIsRejected) {
  EXPECT_FALSE(ApplyMergePatch(json::object(), json::array()).ok());
  EXPECT_FALSE(ApplyMergePatch(json::object(), "x").ok());
}

TEST(JsonPatchTest, AllOperations) {
  json doc = json::parse(R"({"spec":{"taints":[{"key":"a"}],"x":1},"m":{"a/b":2,"t~":3}})");
  json p = json::parse(R"([
    {"op":"add","path":"/spec/taints/-","value":{"key":"b"}},
    {"op":"add","path":"/spec/taints/0","value":{"key":"z"}},
    {"op":"replace","path":"/spec/x","value":5},
    {"op":"remove","path":"/m/a~1b"},
    {"op":"copy","from":"/m/t~0","path":"/m/copy"},
    {"op":"move","from":"/spec/x","path":"/moved"},
    {"op":"test","path":"/moved","value":5}
  ])");
  auto r = ApplyJsonPatch(doc, p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(
      *r,
      json::parse(
          R"({"spec":{"taints":[{"key":"z"},{"key":"a"},{"key":"b"}]},"m":{"t~":3,"copy":3},"moved":5})"));
}

TEST(JsonPatchTest, Errors) {
  json doc = json::parse(R"({"a":{"b":[1]}})");
  auto missing = ApplyJsonPatch(doc, json::parse(R"([{"op":"add","path":"/x/y","value":1}])"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "add operation does not apply: doc is missing path: \"/x/y\": missing value");
  EXPECT_FALSE(IsJsonPatchTestFailure(missing.status()));
  auto test = ApplyJsonPatch(doc, json::parse(R"([{"op":"test","path":"/a/b/0","value":2}])"));
  ASSERT_FALSE(test.ok());
  EXPECT_TRUE(IsJsonPatchTestFailure(test.status()));
  EXPECT_EQ(test.status().message(), "testing value /a/b/0 failed: test failed");
  EXPECT_FALSE(ApplyJsonPatch(doc, json::parse(R"([{"op":"remove","path":"/a/b/1"}])")).ok());
  EXPECT_FALSE(
      ApplyJsonPatch(doc, json::parse(R"([{"op":"replace","path":"/nope","value":1}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, json::parse(R"([{"op":"frob","path":"/a"}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, json::parse(R"([{"path":"/a"}])")).ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, json::parse(R"({"op":"add"})")).ok());
  EXPECT_FALSE(ApplyJsonPatch(doc, json::parse(R"([{"op":"add","path":"a","value":1}])")).ok());
  EXPECT_FALSE(
      ApplyJsonPatch(doc, json::parse(R"([{"op":"add","path":"/a/b/01","value":1}])")).ok());
  EXPECT_FALSE(
      ApplyJsonPatch(doc, json::parse(R"([{"op":"move","from":"/a","path":"/a/c"}])")).ok());
  EXPECT_EQ(doc, json::parse(R"({"a":{"b":[1]}})"));  // input untouched
}

json Node() {
  return json::parse(R"({
    "metadata":{"name":"n","labels":{"a":"1"},"finalizers":["f1"],
                "ownerReferences":[{"uid":"u1","name":"o1","kind":"X","apiVersion":"v1"}]},
    "spec":{"taints":[{"key":"a","effect":"NoSchedule"},{"key":"b","effect":"NoExecute"}]},
    "status":{"conditions":[{"type":"Ready","status":"True"},{"type":"MemoryPressure","status":"False"}],
              "images":[{"names":["x"]}]}})");
}

TEST(StrategicMergePatchTest, CordonAndUncordon) {
  auto r =
      ApplyStrategicMergePatch(Node(), json::parse(R"({"spec":{"unschedulable":true}})"), "Node");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["spec"]["unschedulable"], true);
  EXPECT_EQ((*r)["spec"]["taints"].size(), 2u);
  auto u = ApplyStrategicMergePatch(*r, json::parse(R"({"spec":{"unschedulable":null}})"), "Node");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE((*u)["spec"].contains("unschedulable"));
}

TEST(StrategicMergePatchTest, TaintsAreAtomic) {
  auto r = ApplyStrategicMergePatch(
      Node(), json::parse(R"({"spec":{"taints":[{"effect":"NoSchedule","key":"k","value":"v"}]}})"),
      "Node");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["spec"]["taints"],
            json::parse(R"([{"effect":"NoSchedule","key":"k","value":"v"}])"));
  auto d = ApplyStrategicMergePatch(Node(), json::parse(R"({"spec":{"taints":null}})"), "Node");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE((*d)["spec"].contains("taints"));
  EXPECT_EQ(ListStrategyFor("Node", "spec.taints").kind, ListStrategy::Kind::kAtomic);
}

TEST(StrategicMergePatchTest, ConditionsMergeOnType) {
  auto r = ApplyStrategicMergePatch(
      Node(),
      json::parse(
          R"({"status":{"conditions":[{"type":"GPUHealthy","status":"False"},{"type":"Ready","status":"False"}]}})"),
      "Node");
  ASSERT_TRUE(r.ok());
  const json& c = (*r)["status"]["conditions"];
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], json::parse(R"({"type":"Ready","status":"False"})"));
  EXPECT_EQ(c[1]["type"], "MemoryPressure");
  EXPECT_EQ(c[2]["type"], "GPUHealthy");
}

TEST(StrategicMergePatchTest, DeleteDirectiveAndSetElementOrder) {
  auto r = ApplyStrategicMergePatch(
      Node(),
      json::parse(
          R"({"status":{"$setElementOrder/conditions":[{"type":"MemoryPressure"},{"type":"Ready"}],
                     "conditions":[{"type":"Ready","$patch":"delete"}]}})"),
      "Node");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["status"]["conditions"],
            json::parse(R"([{"type":"MemoryPressure","status":"False"}])"));
  auto o = ApplyStrategicMergePatch(
      Node(),
      json::parse(
          R"({"status":{"$setElementOrder/conditions":[{"type":"MemoryPressure"},{"type":"Ready"}]}})"),
      "Node");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ((*o)["status"]["conditions"][0]["type"], "MemoryPressure");
}

TEST(StrategicMergePatchTest, ReplaceDirectives) {
  auto r = ApplyStrategicMergePatch(
      Node(),
      json::parse(
          R"({"status":{"conditions":[{"$patch":"replace"},{"type":"X","status":"True"}]}})"),
      "Node");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["status"]["conditions"], json::parse(R"([{"type":"X","status":"True"}])"));
  auto m = ApplyStrategicMergePatch(
      Node(), json::parse(R"({"metadata":{"labels":{"$patch":"replace","z":"9"}}})"), "Node");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)["metadata"]["labels"], json::parse(R"({"z":"9"})"));
  auto d =
      ApplyStrategicMergePatch(Node(), json::parse(R"({"status":{"$patch":"delete"}})"), "Node");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->contains("status"));
  EXPECT_FALSE(
      ApplyStrategicMergePatch(Node(), json::parse(R"({"status":{"$patch":"bogus"}})"), "Node")
          .ok());
}

TEST(StrategicMergePatchTest, FinalizersAndOwnerReferences) {
  auto r = ApplyStrategicMergePatch(Node(), json::parse(R"({"metadata":{"finalizers":["f2","f1"],
        "ownerReferences":[{"uid":"u2","name":"o2","kind":"X","apiVersion":"v1"},{"uid":"u1","name":"renamed"}]}})"),
                                    "Node");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["metadata"]["finalizers"], json::parse(R"(["f1","f2"])"));
  ASSERT_EQ((*r)["metadata"]["ownerReferences"].size(), 2u);
  EXPECT_EQ((*r)["metadata"]["ownerReferences"][0]["name"], "renamed");
  auto d = ApplyStrategicMergePatch(
      *r, json::parse(R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["f1"]}})"), "Node");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)["metadata"]["finalizers"], json::parse(R"(["f2"])"));
}

TEST(StrategicMergePatchTest, PodContainersMergeOnNameAndTolerationsAtomic) {
  json pod = json::parse(
      R"({"spec":{"containers":[{"name":"a","image":"i1","env":[{"name":"X","value":"1"}]},
                                                   {"name":"b","image":"i2"}],
                                     "tolerations":[{"key":"t1","operator":"Exists"}],
                                     "volumes":[{"name":"v","emptyDir":{}}]}})");
  auto r = ApplyStrategicMergePatch(
      pod,
      json::parse(
          R"({"spec":{"containers":[{"name":"a","image":"i9","env":[{"name":"Y","value":"2"}]}],
                                   "tolerations":[{"key":"t2","operator":"Exists"}],
                                   "volumes":[{"name":"v","$retainKeys":["name","hostPath"],"hostPath":{"path":"/x"}}]}})"),
      "Pod");
  ASSERT_TRUE(r.ok()) << r.status();
  const json& s = (*r)["spec"];
  EXPECT_EQ(s["containers"].size(), 2u);
  EXPECT_EQ(s["containers"][0]["image"], "i9");
  EXPECT_EQ(s["containers"][0]["env"].size(), 2u);
  EXPECT_EQ(s["tolerations"], json::parse(R"([{"key":"t2","operator":"Exists"}])"));
  EXPECT_EQ(s["volumes"][0], json::parse(R"({"name":"v","hostPath":{"path":"/x"}})"));
}

TEST(StrategicMergePatchTest, DeploymentTemplateUsesPodKeys) {
  EXPECT_EQ(ListStrategyFor("Deployment", "spec.template.spec.containers").merge_key, "name");
  EXPECT_EQ(ListStrategyFor("DaemonSet", "spec.template.spec.containers[].env").merge_key, "name");
  EXPECT_EQ(ListStrategyFor("Pod", "spec.volumes").retain_keys, true);
  EXPECT_EQ(ListStrategyFor("Event", "related").kind, ListStrategy::Kind::kAtomic);
}

TEST(StrategicMergePatchTest, EventRecorderPatch) {
  json ev = json::parse(R"({"count":1,"message":"a","lastTimestamp":"2026-01-01T00:00:00Z"})");
  auto r = ApplyStrategicMergePatch(
      ev, json::parse(R"({"count":2,"message":"b","lastTimestamp":"2026-01-01T00:01:00Z"})"),
      "Event");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["count"], 2);
}

TEST(StrategicMergePatchTest, BadInputIsAnErrorNotACrash) {
  EXPECT_FALSE(ApplyStrategicMergePatch(Node(), json::array(), "Node").ok());
  EXPECT_FALSE(ApplyStrategicMergePatch(
                   Node(), json::parse(R"({"status":{"conditions":[{"status":"x"}]}})"), "Node")
                   .ok());  // missing merge key
  EXPECT_FALSE(
      ApplyStrategicMergePatch(Node(), json::parse(R"({"status":{"conditions":["x"]}})"), "Node")
          .ok());
  EXPECT_FALSE(ApplyStrategicMergePatch(
                   Node(), json::parse(R"({"metadata":{"finalizers":[{"a":1}]}})"), "Node")
                   .ok());
  EXPECT_FALSE(
      ApplyStrategicMergePatch(Node(), json::parse(R"({"$patch":"delete"})"), "Node").ok());
  EXPECT_FALSE(ApplyStrategicMergePatch(Node(), json::parse(R"({"$bogus":1})"), "Node").ok());
  // Original of the wrong shape: patch wins.
  auto r =
      ApplyStrategicMergePatch(json::parse(R"({"status":{"conditions":"str"}})"),
                               json::parse(R"({"status":{"conditions":[{"type":"A"}]}})"), "Node");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["status"]["conditions"].size(), 1u);
}

TEST(StrategicMergePatchTest, SupportsStrategicMerge) {
  EXPECT_TRUE(SupportsStrategicMerge("Node"));
  EXPECT_TRUE(SupportsStrategicMerge("Lease"));
  EXPECT_FALSE(SupportsStrategicMerge("GPUHealthPolicy"));
}

}  // namespace
}  // namespace gg::sim
