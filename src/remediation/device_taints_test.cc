// Device-level (DRA) pure logic: API version order and discovery parsing, GPU UUID ->
// (driver, pool, device) mapping from ResourceSlices, pods holding a device through claims,
// and the DeviceTaintRule we write (name, ownership, taint value limits).
#include "remediation/device_taints.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "k8s/codec.h"

namespace gg::remediation {
namespace {

using json = nlohmann::json;

TEST(DeviceTaints, ApiVersionsSortNewestFirst) {
  std::vector<std::string> v = {"v1alpha3", "v1beta1", "v1", "v1beta2", "v2alpha1", "weird"};
  std::sort(v.begin(), v.end(), NewerApiVersion);
  // Kubernetes version priority: GA > beta > alpha, then the higher major, then minor.
  EXPECT_EQ(
      v, (std::vector<std::string>{"v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha3", "weird"}));
}

TEST(DeviceTaints, DiscoveryDocuments) {
  auto versions = ParseGroupVersions(R"({"kind":"APIGroup","name":"resource.k8s.io",
      "versions":[{"groupVersion":"resource.k8s.io/v1","version":"v1"},
                  {"groupVersion":"resource.k8s.io/v1alpha3","version":"v1alpha3"}],
      "preferredVersion":{"version":"v1"}})");
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ(*versions, (std::vector<std::string>{"v1", "v1alpha3"}));
  EXPECT_FALSE(ParseGroupVersions("<html>").ok());
  EXPECT_FALSE(ParseGroupVersions(R"({"kind":"Status"})").ok());

  auto res = ParseDraResources(R"({"kind":"APIResourceList","resources":[
      {"name":"devicetaintrules","kind":"DeviceTaintRule"},
      {"name":"devicetaintrules/status","kind":"DeviceTaintRule"}]})");
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->device_taint_rules);
  EXPECT_TRUE(res->device_taint_rule_status);
  EXPECT_FALSE(res->resource_slices);
  auto old = ParseDraResources(R"({"resources":[{"name":"resourceslices"},{"name":"resourceclaims"},
      {"name":"resourceclaims/status"},{"name":"devicetaintrules"}]})");
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->resource_slices && old->resource_claims && old->device_taint_rules);
  EXPECT_FALSE(old->device_taint_rule_status);  // 1.33/1.34: no status, no effect None
  EXPECT_FALSE(ParseDraResources("[]").ok());
}

k8s::ResourceSlice Slice(const std::string& node, const std::string& driver,
                         const std::string& pool,
                         std::vector<std::pair<std::string, std::string>> devices,
                         const std::string& attr = "uuid") {
  k8s::ResourceSlice s;
  s.node_name = node;
  s.driver = driver;
  s.pool_name = pool;
  for (auto& [name, uuid] : devices) {
    k8s::Device d;
    d.name = name;
    d.attributes[attr] = uuid;
    d.attributes["index"] = "0";
    s.devices.push_back(d);
  }
  return s;
}

TEST(DeviceTaints, MapsUuidsOfTheNodeAndDriverOnly) {
  std::vector<k8s::ResourceSlice> slices = {
      Slice("node-a", "gpu.nvidia.com", "node-a", {{"gpu-0", "GPU-a0"}, {"gpu-1", "GPU-a1"}}),
      Slice("node-b", "gpu.nvidia.com", "node-b", {{"gpu-0", "GPU-b0"}}),
      Slice("node-a", "other.example.com", "node-a", {{"dev-9", "GPU-a9"}}),
      Slice("node-a", "gpu.nvidia.com", "node-a-extra", {{"gpu-7", "GPU-a7"}},
            "gpu.nvidia.com/uuid")};
  auto m = MapGpuDevices(slices, "node-a", "gpu.nvidia.com",
                         {"GPU-a1", "GPU-b0", "GPU-a9", "GPU-a7", "GPU-nope"});
  ASSERT_EQ(m.by_uuid.size(), 2u);
  EXPECT_EQ(m.by_uuid["GPU-a1"], (DeviceRef{"gpu.nvidia.com", "node-a", "gpu-1"}));
  EXPECT_EQ(m.by_uuid["GPU-a7"], (DeviceRef{"gpu.nvidia.com", "node-a-extra", "gpu-7"}));
  EXPECT_EQ(m.unmapped, (std::vector<std::string>{"GPU-b0", "GPU-a9", "GPU-nope"}));
  auto none = MapGpuDevices({}, "node-a", "gpu.nvidia.com", {"GPU-a1"});
  EXPECT_TRUE(none.by_uuid.empty());
  EXPECT_EQ(none.unmapped.size(), 1u);
}

TEST(DeviceTaints, MapsFromRealSliceShapes) {
  // v1 (flat) and v1beta1 (basic) devices, as the API server returns them.
  for (const char* body : {
           R"({"spec":{"driver":"gpu.nvidia.com","nodeName":"n","pool":{"name":"n"},
               "devices":[{"name":"gpu-3","attributes":{"uuid":{"string":"GPU-3"},"index":{"int":3}}}]}})",
           R"({"spec":{"driver":"gpu.nvidia.com","nodeName":"n","pool":{"name":"n"},
               "devices":[{"name":"gpu-3","basic":{"attributes":{"uuid":{"string":"GPU-3"}}}}]}})"}) {
    auto s = k8s::ParseObject<k8s::ResourceSlice>(body);
    ASSERT_TRUE(s.ok()) << s.status();
    auto m = MapGpuDevices({*s}, "n", "gpu.nvidia.com", {"GPU-3"});
    EXPECT_EQ(m.by_uuid["GPU-3"], (DeviceRef{"gpu.nvidia.com", "n", "gpu-3"})) << body;
  }
}

// The driver's taints come with the same LIST, from both slice shapes, asked for or not;
// a device without a uuid attribute keeps its taint with an empty uuid.
TEST(DeviceTaints, CollectsTheDriversTaintsFromBothShapes) {
  for (const char* body : {
           R"({"spec":{"driver":"gpu.nvidia.com","nodeName":"n","pool":{"name":"n"},
               "devices":[{"name":"gpu-3","attributes":{"uuid":{"string":"GPU-3"}},
                 "taints":[{"key":"gpu.nvidia.com/xid","value":"48","effect":"NoSchedule",
                            "timeAdded":"2026-01-01T00:00:00Z"}]},
                 {"name":"gpu-4","taints":[{"key":"gpu.nvidia.com/xid","effect":"None"}]}]}})",
           R"({"spec":{"driver":"gpu.nvidia.com","nodeName":"n","pool":{"name":"n"},
               "devices":[{"name":"gpu-3","basic":{"attributes":{"uuid":{"string":"GPU-3"}},
                 "taints":[{"key":"gpu.nvidia.com/xid","value":"48","effect":"NoSchedule",
                            "timeAdded":"2026-01-01T00:00:00Z"}]}},
                 {"name":"gpu-4","basic":{"taints":[{"key":"gpu.nvidia.com/xid","effect":"None"}]}}]}})"}) {
    auto s = k8s::ParseObject<k8s::ResourceSlice>(body);
    ASSERT_TRUE(s.ok()) << s.status();
    auto m = MapGpuDevices({*s}, "n", "gpu.nvidia.com", {});
    ASSERT_EQ(m.driver_taints.size(), 2u) << body;
    const DriverTaint& t = m.driver_taints[0];
    EXPECT_EQ(t.device, (DeviceRef{"gpu.nvidia.com", "n", "gpu-3"}));
    EXPECT_EQ(t.uuid, "GPU-3");
    EXPECT_EQ(t.ToString(), "gpu.nvidia.com/xid=48:NoSchedule");
    EXPECT_TRUE(t.time_added.has_value());
    EXPECT_EQ(m.driver_taints[1].uuid, "");
    EXPECT_EQ(m.driver_taints[1].ToString(), "gpu.nvidia.com/xid:None");
    // Another node's or driver's slice contributes nothing.
    EXPECT_TRUE(MapGpuDevices({*s}, "other", "gpu.nvidia.com", {}).driver_taints.empty());
    EXPECT_TRUE(MapGpuDevices({*s}, "n", "other.example.com", {}).driver_taints.empty());
  }
}

TEST(DeviceTaints, ADriverTaintCoversOursOnlyWhenItKeepsPodsOffAndIsAsStrong) {
  EXPECT_TRUE(DriverTaintCovers("NoSchedule", "NoSchedule"));
  EXPECT_TRUE(DriverTaintCovers("NoExecute", "NoSchedule"));
  EXPECT_TRUE(DriverTaintCovers("NoSchedule", "None"));
  EXPECT_FALSE(DriverTaintCovers("NoSchedule", "NoExecute"));  // ours also evicts
  EXPECT_FALSE(DriverTaintCovers("None", "None"));
  EXPECT_FALSE(DriverTaintCovers("SomeFutureEffect", "NoSchedule"));  // treated as None
}

k8s::Pod PodWithClaim(const std::string& ns, const std::string& name, const std::string& uid,
                      std::vector<std::string> claims) {
  k8s::Pod p;
  p.meta.namespace_ = ns;
  p.meta.name = name;
  p.meta.uid = uid;
  p.resource_claims = std::move(claims);
  return p;
}
k8s::ResourceClaim Claim(std::vector<DeviceRef> devices,
                         std::vector<k8s::ObjectReference> reserved) {
  k8s::ResourceClaim c;
  for (auto& d : devices) c.allocations.push_back({"gpu", d.driver, d.pool, d.device});
  c.reserved_for = std::move(reserved);
  return c;
}

TEST(DeviceTaints, PodsHoldingDevicesNeedAllocationAndReservation) {
  DeviceRef bad{"gpu.nvidia.com", "node-a", "gpu-3"};
  DeviceRef good{"gpu.nvidia.com", "node-a", "gpu-4"};
  std::vector<k8s::Pod> pods = {
      PodWithClaim("ml", "holder", "u1", {"c-bad"}),
      PodWithClaim("ml", "other", "u2", {"c-good"}),
      PodWithClaim("ml", "shares", "u3", {"c-shared"}),
      PodWithClaim("ml", "not-reserved", "u4", {"c-unreserved"}),
      PodWithClaim("other-ns", "holder", "u5", {"c-bad"}),  // same claim name, other namespace
      PodWithClaim("ml", "plain", "u6", {})};
  std::map<std::string, k8s::ResourceClaim> claims = {
      {"ml/c-bad", Claim({bad}, {{"", "pods", "", "holder", "u1"}})},
      {"ml/c-good", Claim({good}, {{"", "pods", "", "other", "u2"}})},
      {"ml/c-shared", Claim({good, bad}, {{"", "pods", "", "shares", "u3"}})},
      {"ml/c-unreserved", Claim({bad}, {})},
      {"other-ns/c-bad", Claim({good}, {{"", "pods", "", "holder", "u5"}})}};
  auto holders = PodsHoldingDevices(pods, claims, {bad});
  EXPECT_EQ(holders, (std::set<std::string>{"u1", "u3"}));
  EXPECT_TRUE(PodsHoldingDevices(pods, claims, {}).empty());
  // reservedFor without a UID matches by name.
  claims["ml/c-unreserved"] = Claim({bad}, {{"", "pods", "", "not-reserved", ""}});
  EXPECT_TRUE(PodsHoldingDevices(pods, claims, {bad}).contains("u4"));
}

TEST(DeviceTaints, RuleNamesAreUniqueValidSubdomains) {
  DeviceRef a{"gpu.nvidia.com", "node-a", "gpu-3"};
  std::string n = DeviceTaintRuleName(a);
  EXPECT_TRUE(n.starts_with("gpuguardian-node-a-gpu-3-")) << n;
  EXPECT_EQ(n, DeviceTaintRuleName(a));  // deterministic: a retried create finds it
  // Pool/device split differently must not collide.
  EXPECT_NE(DeviceTaintRuleName({"gpu.nvidia.com", "a-b", "c"}),
            DeviceTaintRuleName({"gpu.nvidia.com", "a", "b-c"}));
  EXPECT_NE(DeviceTaintRuleName({"x.example.com", "p", "d"}),
            DeviceTaintRuleName({"gpu.nvidia.com", "p", "d"}));
  std::string longname = DeviceTaintRuleName({"gpu.nvidia.com", std::string(300, 'p'), "gpu-0"});
  EXPECT_LE(longname.size(), 253u);
  for (char c : longname)
    EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
  std::string odd = DeviceTaintRuleName({"gpu.nvidia.com", "Node_A.", "gpu-0"});
  EXPECT_EQ(odd.find("_"), std::string::npos);
  EXPECT_EQ(odd.find(".-"), std::string::npos) << odd;
}

TEST(DeviceTaints, TaintValuesAreLabelValues) {
  EXPECT_EQ(ToLabelValue("fatal-xid"), "fatal-xid");
  EXPECT_EQ(ToLabelValue("Xid 95: uncontained"), "Xid-95--uncontained");
  EXPECT_EQ(ToLabelValue("-x-"), "x");
  EXPECT_EQ(ToLabelValue(std::string(100, 'a')).size(), 63u);
  EXPECT_EQ(ToLabelValue("///"), "");
}

TEST(DeviceTaints, BuiltRuleIsOursAndSelectsOneDevice) {
  DeviceTaintRuleSpec s;
  s.node = "node-a";
  s.gpu_uuid = "GPU-3";
  s.device = {"gpu.nvidia.com", "node-a", "gpu-3"};
  s.reason = "uncontained-ecc";
  s.effect = "NoSchedule";
  s.message = std::string(5000, 'm');
  s.policy = "default";
  std::string body = BuildDeviceTaintRule("v1beta2", s);
  json j = json::parse(body);
  EXPECT_EQ(j["apiVersion"], "resource.k8s.io/v1beta2");
  EXPECT_EQ(j["kind"], "DeviceTaintRule");
  EXPECT_EQ(j["metadata"]["name"], DeviceTaintRuleName(s.device));
  EXPECT_EQ(j["spec"]["deviceSelector"],
            json({{"driver", "gpu.nvidia.com"}, {"pool", "node-a"}, {"device", "gpu-3"}}));
  EXPECT_EQ(j["spec"]["taint"], json({{"key", "gpuguardian.io/unhealthy"},
                                      {"value", "uncontained-ecc"},
                                      {"effect", "NoSchedule"}}));
  EXPECT_EQ(j["metadata"]["annotations"]["gpuguardian.io/gpu-uuid"], "GPU-3");
  EXPECT_LE(j["metadata"]["annotations"]["gpuguardian.io/reason"].get<std::string>().size(), 1024u);
  EXPECT_TRUE(IsOurDeviceTaintRule(body));

  // An admin's rule (no marks, or only one of them) is not ours; garbage is not ours.
  json admin = j;
  admin["metadata"].erase("annotations");
  EXPECT_FALSE(IsOurDeviceTaintRule(admin.dump()));
  json label_only = j;
  label_only["metadata"]["annotations"].erase("gpuguardian.io/owner");
  EXPECT_FALSE(IsOurDeviceTaintRule(label_only.dump()));
  json annotation_only = j;
  annotation_only["metadata"]["labels"].erase("app.kubernetes.io/managed-by");
  EXPECT_FALSE(IsOurDeviceTaintRule(annotation_only.dump()));
  EXPECT_FALSE(IsOurDeviceTaintRule("not json"));
  EXPECT_EQ(RuleUid(R"({"metadata":{"uid":"abc"}})"), "abc");
  EXPECT_EQ(RuleUid("[]"), "");
}

TEST(DeviceTaints, DeviceRefRoundTrip) {
  DeviceRef d{"gpu.nvidia.com", "pool/with/slash", "gpu-3"};
  auto back = ParseDeviceRef(d.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, d);
  for (const char* bad : {"", "a", "a/b", "/p/d", "a//d", "a/p/"}) {
    EXPECT_FALSE(ParseDeviceRef(bad).ok()) << bad;
  }
}

// KEP-4817: our condition goes on the entry of the fenced device only (added when the driver
// wrote none), keeps the driver's own data and conditions, and comes off again on recovery.
TEST(ClaimWithDeviceCondition, SetsAndRemovesOurConditionOnly) {
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "c"}, {"namespace", "ml"}, {"resourceVersion", "7"}}}};
  claim["status"]["allocation"]["devices"]["results"] = json::array(
      {{{"request", "a"}, {"driver", "gpu.nvidia.com"}, {"pool", "n1"}, {"device", "gpu-3"}},
       {{"request", "b"}, {"driver", "gpu.nvidia.com"}, {"pool", "n1"}, {"device", "gpu-4"}}});
  claim["status"]["devices"] = json::array(
      {{{"driver", "gpu.nvidia.com"},
        {"pool", "n1"},
        {"device", "gpu-4"},
        {"data", {{"k", "v"}}},
        {"conditions", {{{"type", "Ready"}, {"status", "True"}, {"reason", "Driver"}}}}}});
  const std::vector<DeviceRef> fenced = {{"gpu.nvidia.com", "n1", "gpu-3"},
                                         {"gpu.nvidia.com", "n1", "gpu-4"},
                                         {"gpu.nvidia.com", "n1", "gpu-9"}};  // not allocated
  ClaimDeviceCondition bad{false, "Xid 95", "2026-01-01T00:00:00Z"};
  auto set = ClaimWithDeviceCondition(claim.dump(), fenced, bad);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(set->has_value());
  json got = json::parse(**set);
  EXPECT_EQ(got["metadata"]["resourceVersion"], "7");  // optimistic concurrency kept
  ASSERT_EQ(got["status"]["devices"].size(), 2u);
  json e4 = got["status"]["devices"][0], e3 = got["status"]["devices"][1];
  EXPECT_EQ(e4["data"], json({{"k", "v"}}));
  ASSERT_EQ(e4["conditions"].size(), 2u);
  EXPECT_EQ(e4["conditions"][0]["type"], "Ready");
  EXPECT_EQ(e3["device"], "gpu-3");
  EXPECT_EQ(e3["conditions"][0], json({{"type", "GPUHealthy"},
                                       {"status", "False"},
                                       {"reason", "DeviceFenced"},
                                       {"message", "Xid 95"},
                                       {"lastTransitionTime", "2026-01-01T00:00:00Z"}}));
  // Applying it again changes nothing.
  auto again = ClaimWithDeviceCondition(**set, fenced, bad);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());

  auto cleared = ClaimWithDeviceCondition(**set, fenced, {true, "", "2026-01-01T01:00:00Z"});
  ASSERT_TRUE(cleared.ok());
  ASSERT_TRUE(cleared->has_value());
  EXPECT_EQ(json::parse(**cleared)["status"]["devices"], claim["status"]["devices"]);
}

TEST(ClaimWithDeviceCondition, GarbageAndUnallocatedClaims) {
  ClaimDeviceCondition bad{false, "x", "2026-01-01T00:00:00Z"};
  EXPECT_FALSE(ClaimWithDeviceCondition("not json", {}, bad).ok());
  EXPECT_FALSE(ClaimWithDeviceCondition(R"({"kind":"Pod"})", {}, bad).ok());
  auto none = ClaimWithDeviceCondition(R"({"kind":"ResourceClaim","metadata":{"name":"c"}})",
                                       {{"d", "p", "x"}}, bad);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace gg::remediation
