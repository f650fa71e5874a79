// Unit tests for the plugin's rows and rendering (no server).
#include <gtest/gtest.h>

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

TEST(Status, RowFromConditionTaintAndRecord) {
  k8s::Node n = GpuNode("dgx-4");
  n.unschedulable = true;
  n.taints.push_back({api::kTaintKey, "Xid79", "NoSchedule", std::nullopt});
  WallTime t = *ParseRfc3339("2026-11-29T10:00:00Z");
  n.conditions.push_back({api::kConditionType, "False", "RulesMatched", "GPU 3: Xid 79", t, t});
  n.meta.annotations.Set(api::kRemediationAnnotation,
                         R"({"policy":"default","tainted":true,"cordoned":true,"drain":{"phase":"Completed"}})");
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

}  // namespace
}  // namespace gg::cli
