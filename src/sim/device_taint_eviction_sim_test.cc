// The simulated device-taint eviction controller, per Kubernetes release (the shapes differ:
// v1beta1 slices with `basic` devices and v1beta2 claims on 1.33, v1 from 1.34, DeviceTaintRule
// v1alpha3 until 1.35 and v1beta2 on 1.36). World state only: which pods exist afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "sim/population.h"
#include "sim/schema.h"
#include "sim/server.h"
#include "sim/test_util.h"

namespace gg::sim {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr char kKey[] = "gpuguardian.io/unhealthy";

class DeviceTaintEvictionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SimOptions o;
    o.kube_version = GetParam();
    o.time_scale = 10;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    for (const std::string node : {"gpu-a", "gpu-b"}) {
      json n = {{"apiVersion", "v1"},
                {"kind", "Node"},
                {"metadata", {{"name", node}}},
                {"spec", json::object()},
                {"status",
                 {{"capacity", {{"cpu", "16"}, {"pods", "110"}}},
                  {"allocatable", {{"cpu", "16"}, {"pods", "110"}}},
                  {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
      auto created = sim_->CreateAndGet("/api/v1/nodes", n);
      ASSERT_TRUE(created.ok()) << created.status();
      json slice = MakeResourceSlice(node, 8, "NVIDIA-H100-80GB-HBM3", GetParam());
      slice["metadata"]["ownerReferences"][0]["uid"] = (*created)["metadata"]["uid"];
      ASSERT_TRUE(sim_->Insert(slice).ok());
    }
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }
  std::string ClaimVersion() const { return GetParam() >= "1.34" ? "v1" : "v1beta2"; }
  std::string RuleVersion() const { return DeviceTaintRuleVersion(GetParam()); }

  // A running pod on `node` using device gpu-<gpu> of that node's pool through its own
  // claim, allocated and reserved as the scheduler leaves it. `tolerations` go into the
  // allocation result, as the allocator copies them from the request. With `reserved` false
  // the claim is reserved for some other pod UID.
  void AddPod(const std::string& name, const std::string& node, int gpu, json tolerations = nullptr,
              bool reserved = true) {
    json container = {{"name", "c"}, {"image", "cuda"}};
    container["resources"]["claims"] = json::array({{{"name", "gpu"}}});
    json p = {{"apiVersion", "v1"}, {"kind", "Pod"}};
    p["metadata"] = {{"name", name}, {"namespace", "ml"}};
    p["spec"]["nodeName"] = node;
    p["spec"]["terminationGracePeriodSeconds"] = 0;
    p["spec"]["resourceClaims"] =
        json::array({{{"name", "gpu"}, {"resourceClaimName", name + "-gpu"}}});
    p["spec"]["containers"] = json::array({container});
    auto created = sim_->CreateAndGet("/api/v1/namespaces/ml/pods", p);
    ASSERT_TRUE(created.ok()) << created.status();
    const std::string uid = (*created)["metadata"].value("uid", "");
    json request = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}};
    if (ClaimVersion() == "v1beta1")
      request = {{"name", "gpu"}, {"deviceClassName", "gpu.nvidia.com"}};
    json result = {{"request", "gpu"},
                   {"driver", "gpu.nvidia.com"},
                   {"pool", node},
                   {"device", "gpu-" + std::to_string(gpu)}};
    if (!tolerations.is_null()) {
      request["exactly"]["tolerations"] = tolerations;
      result["tolerations"] = tolerations;
    }
    json claim;
    claim["apiVersion"] = "resource.k8s.io/" + ClaimVersion();
    claim["kind"] = "ResourceClaim";
    claim["metadata"] = {{"name", name + "-gpu"}, {"namespace", "ml"}};
    claim["spec"]["devices"]["requests"] = json::array({request});
    claim["status"]["allocation"]["devices"]["results"] = json::array({result});
    claim["status"]["reservedFor"] =
        json::array({{{"resource", "pods"},
                      {"name", name},
                      {"uid", reserved ? uid : std::string("other-uid")}}});
    Status st = sim_->Insert(claim);
    ASSERT_TRUE(st.ok()) << st;
  }
  // A DeviceTaintRule of the shape the operator writes (driver/pool/device selector).
  void AddRule(const std::string& name, const std::string& node, int gpu,
               const std::string& effect) {
    json rule = {{"apiVersion", "resource.k8s.io/" + RuleVersion()},
                 {"kind", "DeviceTaintRule"},
                 {"metadata", {{"name", name}}},
                 {"spec",
                  {{"deviceSelector",
                    {{"driver", "gpu.nvidia.com"},
                     {"pool", node},
                     {"device", "gpu-" + std::to_string(gpu)}}},
                   {"taint", {{"key", kKey}, {"value", "xid-95"}, {"effect", effect}}}}}};
    auto r = sim_->Create("/apis/resource.k8s.io/" + RuleVersion() + "/devicetaintrules", rule);
    ASSERT_TRUE(r.ok()) << r;
  }
  bool Gone(const std::string& pod) {
    auto g = sim_->Get("/api/v1/namespaces/ml/pods/" + pod);
    return !g.ok() || (*g)["metadata"].contains("deletionTimestamp");
  }
  std::unique_ptr<SimServer> sim_;
};

// Our NoExecute rule on gpu-a/gpu-3 deletes exactly the pods holding that device and not
// tolerating the taint: not the pod on gpu-4, not gpu-3 of the other node, not a pod whose
// claim is reserved for someone else, not a pod tolerating it forever; a pod tolerating it
// for 20 s (2 s at time scale 10) goes after that.
TEST_P(DeviceTaintEvictionTest, NoExecuteRuleEvictsExactlyThePodsHoldingTheDevice) {
  AddPod("holder", "gpu-a", 3);
  AddPod("neighbour", "gpu-a", 4);
  AddPod("other-node", "gpu-b", 3);
  AddPod("not-reserved", "gpu-a", 3, nullptr, /*reserved=*/false);
  AddPod("forever", "gpu-a", 3, {{{"key", kKey}, {"operator", "Exists"}, {"effect", "NoExecute"}}});
  AddPod("brief", "gpu-a", 3,
         {{{"key", kKey},
           {"operator", "Exists"},
           {"effect", "NoExecute"},
           {"tolerationSeconds", 20}}});
  // A NoSchedule rule evicts nothing.
  AddRule("soft", "gpu-a", 4, "NoSchedule");
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(Gone("neighbour"));

  AddRule("gpuguardian-gpu-a-gpu-3", "gpu-a", 3, "NoExecute");
  ASSERT_TRUE(WaitFor([&] { return Gone("holder"); }, 5s));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(Gone("brief"));
  ASSERT_TRUE(WaitFor([&] { return Gone("brief"); }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1000ms);
  std::this_thread::sleep_for(500ms);
  for (const char* stays : {"neighbour", "other-node", "not-reserved", "forever"})
    EXPECT_FALSE(Gone(stays)) << stays;

  // Deleted, not evicted: the DisruptionTarget reason and the Event name the device taint
  // manager.
  auto events = sim_->List("/apis/events.k8s.io/v1/namespaces/ml/events");
  ASSERT_TRUE(events.ok());
  bool event = false;
  for (const auto& e : (*events)["items"])
    event |= e["regarding"].value("name", "") == "holder" &&
             e.value("reason", "") == "DeviceTaintManagerEviction";
  EXPECT_TRUE(event);
}

// A NoExecute taint the driver publishes in the ResourceSlice evicts the same way; removing
// it before tolerationSeconds run out cancels the eviction.
TEST_P(DeviceTaintEvictionTest, SliceTaintEvictsAndRemovalCancels) {
  AddPod("victim", "gpu-b", 1);
  AddPod("patient", "gpu-b", 2,
         {{{"key", "gpu.nvidia.com/xid"},
           {"operator", "Exists"},
           {"effect", "NoExecute"},
           {"tolerationSeconds", 30}}});
  // The slice in the version it was published in (v1beta1 `basic` devices on 1.33).
  const std::string api = ResourceSliceApiVersion(GetParam());
  auto list = sim_->List("/apis/" + api + "/resourceslices");
  ASSERT_TRUE(list.ok()) << list.status();
  json slice;
  for (const auto& s : (*list)["items"])
    if (s["spec"].value("nodeName", "") == "gpu-b") slice = s;
  ASSERT_TRUE(slice.is_object());
  const std::string path =
      "/apis/" + api + "/resourceslices/" + slice["metadata"]["name"].get<std::string>();
  const bool basic = api == "resource.k8s.io/v1beta1";
  auto taints_of = [&](json& sl, int i) -> json& {
    json& d = sl["spec"]["devices"][i];
    return basic ? d["basic"]["taints"] : d["taints"];
  };
  json taint = {{"key", "gpu.nvidia.com/xid"}, {"value", "48"}, {"effect", "NoExecute"}};
  taints_of(slice, 1) = json::array({taint});
  taints_of(slice, 2) = json::array({taint});
  auto up = sim_->Update(path, slice);
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_TRUE(WaitFor([&] { return Gone("victim"); }, 5s));
  // "patient" tolerates 30 s (3 s scaled); the taint goes before that.
  std::this_thread::sleep_for(500ms);
  slice = *up;
  taints_of(slice, 2) = json::array();
  ASSERT_TRUE(sim_->Update(path, slice).ok());
  std::this_thread::sleep_for(4s);
  EXPECT_FALSE(Gone("patient"));
}

INSTANTIATE_TEST_SUITE_P(Releases, DeviceTaintEvictionTest,
                         ::testing::Values("1.33", "1.34", "1.35", "1.36"), [](const auto& info) {
                           std::string s = "k" + info.param;
                           s.erase(std::remove(s.begin(), s.end(), '.'), s.end());
                           return s;
                         });

}  // namespace
}  // namespace gg::sim
