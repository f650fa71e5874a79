// Device taints in ResourceSlices per release (sim/slice_taints.h), written as NVIDIA's DRA
// driver writes them (population's AddDriverTaint): not part of the API before 1.33 (dropped;
// the population refuses them), kept from 1.33 in the shape of the slice's version (v1beta1
// `basic.taints`, v1 `taints`) with timeAdded set by the server when absent, effect None only
// from 1.35, and the key validated.
#include "sim/slice_taints.h"

#include <gtest/gtest.h>

#include "sim/population.h"
#include "sim/scenario.h"
#include "sim/server.h"

namespace gg::sim {
namespace {

using nlohmann::json;

class SliceTaintsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SimOptions o;
    o.kube_version = GetParam();
    o.kubelet = o.scheduler = o.controllers = false;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }
  std::string Kube() const { return GetParam(); }
  std::string Slices() const {
    return "/apis/" + ResourceSliceApiVersion(Kube()) + "/resourceslices";
  }
  // The slice of node-0 as the driver would write it, gpu-1 carrying `t` (unchecked).
  json SliceWith(const json& taint) const {
    json s = MakeResourceSlice("node-0", 2, "NVIDIA-H100-80GB-HBM3", Kube());
    s["metadata"].erase("ownerReferences");
    json& dev = s["spec"]["devices"][1];
    (dev.contains("basic") ? dev["basic"] : dev)["taints"] = json::array({taint});
    return s;
  }
  static json TaintsOf(const json& slice, int device) {
    const json& d = slice["spec"]["devices"][device];
    const json& h = d.contains("basic") ? d["basic"] : d;
    return h.value("taints", json::array());
  }
  std::unique_ptr<SimServer> sim_;
};

TEST_P(SliceTaintsTest, TheDriversTaintIsKeptWhereTheReleaseServesIt) {
  json xid = {{"key", "gpu.nvidia.com/xid"}, {"value", "79"}, {"effect", "NoSchedule"}};
  auto created = sim_->CreateAndGet(Slices(), SliceWith(xid));
  ASSERT_TRUE(created.ok()) << created.status();
  json taints = TaintsOf(*created, 1);
  if (Kube() < "1.33") {
    EXPECT_TRUE(taints.empty()) << created->dump();  // not part of the API: dropped
    DriverTaintSpec t;
    t.device = "gpu-1";
    json s = MakeResourceSlice("node-0", 2, "NVIDIA-H100-80GB-HBM3", Kube());
    EXPECT_FALSE(AddDriverTaint(s, t, Kube()).ok());
    return;
  }
  ASSERT_EQ(taints.size(), 1u) << created->dump();
  EXPECT_EQ(taints[0].value("key", ""), "gpu.nvidia.com/xid");
  EXPECT_EQ(taints[0].value("value", ""), "79");
  EXPECT_EQ(taints[0].value("effect", ""), "NoSchedule");
  EXPECT_FALSE(taints[0].value("timeAdded", "").empty()) << "the server sets timeAdded";
  EXPECT_TRUE(TaintsOf(*created, 0).empty());
  // A timeAdded the driver sets is kept; an update without one gets the write's time.
  json again = *created;
  json& dev = again["spec"]["devices"][0];
  (dev.contains("basic") ? dev["basic"] : dev)["taints"] =
      json::array({{{"key", "gpu.nvidia.com/xid"},
                    {"value", "48"},
                    {"effect", "NoExecute"},
                    {"timeAdded", "2026-01-02T03:04:05Z"}}});
  auto updated = sim_->Update(Slices() + "/" + again["metadata"].value("name", ""), again);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(TaintsOf(*updated, 0)[0].value("timeAdded", ""), "2026-01-02T03:04:05Z");
}

TEST_P(SliceTaintsTest, EffectAndKeyAreValidatedPerRelease) {
  if (Kube() < "1.33") GTEST_SKIP() << "no device taints before 1.33";
  json none = {{"key", "gpu.nvidia.com/xid"}, {"value", "13"}, {"effect", "None"}};
  json s = SliceWith(none);
  s["metadata"]["name"] = "with-none";
  auto created = sim_->CreateAndGet(Slices(), s);
  EXPECT_EQ(created.ok(), Kube() >= "1.35")
      << (created.ok() ? created->dump() : created.status().ToString());
  DriverTaintSpec t;
  t.device = "gpu-1";
  t.effect = "None";
  json fresh = MakeResourceSlice("node-0", 2, "NVIDIA-H100-80GB-HBM3", Kube());
  EXPECT_EQ(AddDriverTaint(fresh, t, Kube()).ok(), Kube() >= "1.35");
  for (const json& bad : {json{{"key", "not a key!"}, {"effect", "NoSchedule"}},
                          json{{"key", "gpu.nvidia.com/xid"}, {"effect", "PreferNoSchedule"}}}) {
    json b = SliceWith(bad);
    b["metadata"]["name"] = "bad";
    auto r = sim_->Create(Slices(), b);
    EXPECT_FALSE(r.ok()) << bad.dump();
  }
  t.device = "gpu-9";
  t.effect = "NoSchedule";
  EXPECT_FALSE(AddDriverTaint(fresh, t, Kube()).ok()) << "no such device";
}

// A scenario publishes the driver's taints in its nodes' slices; a release without device
// taints (or an unknown device) is an error naming the node, not a silently clean slice.
TEST_P(SliceTaintsTest, AScenarioPublishesTheDriversTaints) {
  auto sc = ParseScenario("kubeVersion: \"" + Kube() +
                          "\"\ndra: true\nnodes:\n"
                          "  - name: gpu-a\n    gpus: 4\n    driverTaints:\n"
                          "      - {device: gpu-2, value: 48}\n");
  ASSERT_TRUE(sc.ok()) << sc.status();
  std::vector<json> slices;
  Status st = EmitScenario(*sc, [&](json&& o) {
    if (o.value("kind", "") == "ResourceSlice") slices.push_back(std::move(o));
    return OkStatus();
  });
  if (Kube() < "1.33") {
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("gpu-a"), std::string::npos) << st;
    return;
  }
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(slices.size(), 1u);
  json taints = TaintsOf(slices[0], 2);
  ASSERT_EQ(taints.size(), 1u) << slices[0].dump();
  EXPECT_EQ(taints[0],
            json({{"key", "gpu.nvidia.com/xid"}, {"value", "48"}, {"effect", "NoSchedule"}}));
  auto bad = ParseScenario("kubeVersion: \"" + Kube() +
                           "\"\ndra: true\nnodes:\n"
                           "  - name: gpu-a\n    gpus: 4\n    driverTaints: [{device: gpu-9}]\n");
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_FALSE(EmitScenario(*bad, [](json&&) { return OkStatus(); }).ok());
}

INSTANTIATE_TEST_SUITE_P(KubeVersions, SliceTaintsTest,
                         ::testing::Values("1.32", "1.33", "1.34", "1.35", "1.36"),
                         [](const auto& info) {
                           std::string s = "k8s_" + info.param;
                           for (auto& c : s) c = c == '.' ? '_' : c;
                           return s;
                         });

}  // namespace
}  // namespace gg::sim
