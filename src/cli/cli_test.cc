// Unit tests for the plugin's rows and rendering (no server).
#include <gtest/gtest.h>

#include <sstream>

#include "cli/driver_taints.h"
#include "cli/plugin.h"
#include "cli/status.h"
#include "cli/timeline.h"
#include "common/time_util.h"

namespace gg::cli {
namespace {

k8s::Node GpuNode(const std::string& name) {
  k8s::Node n;
  n.meta.name = name;
  n.gpu_capacity = 8;
  return n;
}

// What `status`/`explain` show of the taints a DRA driver published itself: per device, the
// device, its uuid, key=value:effect, timeAdded, and who published it; other nodes' left out.
TEST(Status, DriverTaintLinesPerDevice) {
  k8s::ResourceSlice s;
  s.driver = "gpu.nvidia.com";
  s.pool_name = "dgx-4";
  s.node_name = "dgx-4";
  k8s::Device d;
  d.name = "gpu-3";
  d.attributes["uuid"] = "GPU-3";
  d.taints.push_back(
      k8s::Taint{"gpu.nvidia.com/xid", "48", "NoSchedule", *ParseRfc3339("2026-11-29T10:00:00Z")});
  d.taints.push_back({"gpu.nvidia.com/xid", "", "None", std::nullopt});
  s.devices.push_back(d);
  k8s::Device clean;
  clean.name = "gpu-4";
  s.devices.push_back(clean);
  k8s::ResourceSlice other = s;
  other.node_name = "dgx-5";
  auto lines = DriverTaintLines({s, other}, "dgx-4");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "gpu.nvidia.com/dgx-4/gpu-3 (GPU-3) gpu.nvidia.com/xid=48:NoSchedule since "
            "2026-11-29T10:00:00Z, published by the driver");
  EXPECT_EQ(lines[1],
            "gpu.nvidia.com/dgx-4/gpu-3 (GPU-3) gpu.nvidia.com/xid:None, published by the driver");
  EXPECT_TRUE(DriverTaintLines({s}, "dgx-9").empty());
}

TEST(Status, RowFromConditionTaintAndRecord) {
  k8s::Node n = GpuNode("dgx-4");
  n.unschedulable = true;
  n.taints.push_back({api::kTaintKey, "Xid79", "NoSchedule", std::nullopt});
  WallTime t = *ParseRfc3339("2026-11-29T10:00:00Z");
  n.conditions.push_back({api::kConditionType, "False", "RulesMatched", "GPU 3: Xid 79", t, t});
  n.meta.annotations.Set(
      api::kRemediationAnnotation,
      R"({"v":1,"policy":"default","tainted":true,"cordoned":true,"drain":{"phase":"Completed"}})");
  api::GpuNodeHealthStatus rep;
  rep.gpus.resize(8);
  rep.gpus[3].lost = true;
  NodeRow row = BuildRow(n, rep);
  EXPECT_EQ(row.state, "Unhealthy");
  EXPECT_EQ(row.policy, "default");
  EXPECT_EQ(row.gpus_total, 8);
  EXPECT_EQ(row.gpus_bad, 1);
  EXPECT_EQ(row.actions, (std::vector<std::string>{"tainted", "cordoned", "drain:completed"}));
  std::string table = RenderTable({row}, t + std::chrono::seconds(90), false);
  EXPECT_NE(table.find("dgx-4"), std::string::npos);
  EXPECT_NE(table.find("7/8"), std::string::npos);
  EXPECT_NE(table.find("90s"), std::string::npos);
  auto j = RowsToJson({row});
  EXPECT_EQ(j["items"][0]["state"], "Unhealthy");
}

TEST(Status, AdminCordonAndGarbageRecord) {
  k8s::Node n = GpuNode("dgx-1");
  n.unschedulable = true;
  n.meta.annotations.Set(api::kRemediationAnnotation, "{not json");
  NodeRow row = BuildRow(n, std::nullopt);
  EXPECT_EQ(row.state, "NotEvaluated");
  EXPECT_EQ(row.actions, (std::vector<std::string>{"record-unreadable", "cordoned(admin)"}));
}

TEST(Timeline, DescribeReport) {
  api::GpuNodeHealthStatus r;
  EXPECT_EQ(DescribeReport(r), "");
  r.gpus.resize(4);
  for (int i = 0; i < 4; ++i) r.gpus[i].index = i;
  r.gpus[3].lost = true;
  api::XidEvent x;
  x.xid = 79;
  x.count = 1;
  x.recommended_action = "RESTART_BM";
  r.xids.push_back(x);
  EXPECT_EQ(DescribeReport(r), "GPU 3: lost; Xid 79 x1 [RESTART_BM]");
}

TEST(Status, Age) {
  WallTime t{};
  EXPECT_EQ(Age(t, t + std::chrono::seconds(59)), "59s");
  EXPECT_EQ(Age(t, t + std::chrono::seconds(600)), "10m0s");
  EXPECT_EQ(Age(t, t + std::chrono::hours(5)), "5h0m");
  EXPECT_EQ(Age(t + std::chrono::seconds(5), t), "0s");
}

TEST(Status, PolicyColumnAgreesWithWhyAndHeldBackIsShownInFull) {
  k8s::Node n = GpuNode("dgx-2");
  WallTime t = *ParseRfc3339("2026-11-29T10:00:00Z");
  n.conditions.push_back(
      {api::kConditionType, "False", "RulesMatched", "GPU 3: lost [policy fleet]", t, t});
  const std::string why_held =
      "brake: maxUnhealthy 10% reached (1 of 10 nodes fenced); waits until a fenced node "
      "recovers or the limit is raised";
  n.meta.annotations.Set(api::kRemediationAnnotation, R"({"v":1,"skipped":")" + why_held + R"("})");
  NodeRow row = BuildRow(n, std::nullopt);
  EXPECT_EQ(row.policy, "fleet");  // from the verdict, though the record names none
  EXPECT_EQ(row.held_back, why_held);
  EXPECT_EQ(row.actions, (std::vector<std::string>{"held-back"}));
  std::string table = RenderTable({row}, t, false);
  EXPECT_EQ(table.find("[policy"), std::string::npos) << table;
  EXPECT_NE(table.find("fleet"), std::string::npos) << table;
  ClusterStatus st;
  st.rows = {row};
  st.brakes = {{"fleet", "MaxUnhealthy", "1 of 10 nodes fenced"}};
  std::string below = RenderBrakes(st);
  EXPECT_NE(below.find("Brake engaged on policy fleet: 1 of 10 nodes fenced"), std::string::npos)
      << below;
  EXPECT_NE(below.find("dgx-2: " + why_held), std::string::npos) << below;
  std::string wide = RenderTable({row}, t, false, /*wide=*/true);
  EXPECT_NE(wide.find("RulesMatched"), std::string::npos) << wide;
  EXPECT_NE(wide.find("never"), std::string::npos) << wide;  // no report
  auto j = StatusToJson(st);
  EXPECT_EQ(j["items"][0]["heldBack"], why_held);
  EXPECT_EQ(j["brakes"][0]["policy"], "fleet");
}

TEST(Plugin, UnknownCommandListsTheRealOnes) {
  std::ostringstream out, err;
  EXPECT_EQ(RunPlugin({"--kubeconfig", "kc", "statsu", "-o", "json"}, out, err, {}, false), 1);
  EXPECT_NE(err.str().find("unknown command \"statsu\" for \"kubectl gpu-guardian\""),
            std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("status, explain, timeline"), std::string::npos);
  std::ostringstream out2, err2;
  EXPECT_EQ(RunPlugin({"--help"}, out2, err2, {}, false), 0);
  EXPECT_NE(out2.str().find("Usage: kubectl gpu-guardian"), std::string::npos) << out2.str();
  std::ostringstream out3, err3;
  EXPECT_NE(RunPlugin({"status", "-o", "xml"}, out3, err3, {}, false), 0);
}

}  // namespace
}  // namespace gg::cli
