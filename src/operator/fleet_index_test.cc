// FleetIndex: record summaries, brake input, counts, and our own writes winning over stale
// informer deliveries.
#include "operator/fleet_index.h"

#include <gtest/gtest.h>

namespace gg::op {
namespace {

k8s::Node MakeNode(const std::string& name, const std::string& rv,
                   std::optional<remediation::RemediationRecord> rec = std::nullopt) {
  k8s::Node n;
  n.meta.name = name;
  n.meta.resource_version = rv;
  n.meta.labels.Set("nvidia.com/gpu.present", "true");
  if (rec) n.meta.annotations.Set(api::kRemediationAnnotation, remediation::EncodeRecord(*rec));
  return n;
}

remediation::RemediationRecord Fenced(const std::string& policy, bool draining = false) {
  remediation::RemediationRecord r;
  r.occurrence = "occ-1";
  r.policy = policy;
  r.cordoned = true;
  r.started_at = WallTime(std::chrono::seconds(1000));
  if (draining) r.drain.phase = remediation::DrainPhase::kRunning;
  return r;
}

TEST(FleetIndexTest, BrakeInputCountsOnlyOurActiveFencesOfThePolicy) {
  FleetIndex idx;
  api::LabelSelector sel;
  sel.match_labels["nvidia.com/gpu.present"] = "true";
  idx.OnNode(MakeNode("a", "1", Fenced("p", true)));
  idx.OnNode(MakeNode("b", "2", Fenced("other")));
  idx.OnNode(MakeNode("c", "3"));
  k8s::Node excluded = MakeNode("d", "4");
  excluded.meta.labels.Set(api::kExcludeLabel, "true");
  idx.OnNode(excluded);
  auto in = idx.BrakeInputFor("p", sel);
  EXPECT_EQ(in.matched_nodes, 3);
  EXPECT_EQ(in.remediating_nodes, 1);
  EXPECT_EQ(in.active_drains, 1);
  EXPECT_EQ(in.node_starts.size(), 1u);
}

TEST(FleetIndexTest, OwnWriteIsNotUndoneByStaleDelivery) {
  FleetIndex idx;
  api::LabelSelector sel;
  idx.OnNode(MakeNode("a", "10"));
  idx.ApplyOwnRecord("a", Fenced("p"));
  EXPECT_EQ(idx.BrakeInputFor("p", sel).remediating_nodes, 1);
  idx.OnNode(MakeNode("a", "10"));  // a late delivery of the version we wrote over
  EXPECT_EQ(idx.BrakeInputFor("p", sel).remediating_nodes, 1);
  idx.OnNode(MakeNode("a", "11", Fenced("p")));  // our write arrives
  EXPECT_EQ(idx.BrakeInputFor("p", sel).remediating_nodes, 1);
  idx.OnNode(MakeNode("a", "12"));  // record removed by an admin
  EXPECT_EQ(idx.BrakeInputFor("p", sel).remediating_nodes, 0);
}

TEST(FleetIndexTest, CountsAndStates) {
  FleetIndex idx;
  api::LabelSelector sel;
  idx.OnNode(MakeNode("a", "1"));
  idx.OnNode(MakeNode("b", "2"));
  idx.OnNode(MakeNode("c", "3"));
  idx.SetVerdicts("a", {{"p", policy::HealthState::kHealthy}}, "");
  idx.SetVerdicts("b", {{"p", policy::HealthState::kUnhealthy}}, "p");
  auto changed = idx.SetVerdicts("c", {{"p", policy::HealthState::kUnknown}}, "");
  EXPECT_EQ(changed, std::vector<std::string>{"p"});
  PolicyCounts c = idx.CountsFor("p", sel);
  EXPECT_EQ(c.matched, 3);
  EXPECT_EQ(c.healthy, 1);
  EXPECT_EQ(c.unhealthy, 1);
  EXPECT_EQ(c.unknown, 1);
  EXPECT_EQ(c.braked, 1);
  auto states = idx.StateCounts();
  EXPECT_EQ(states["Unhealthy"], 1);
  EXPECT_EQ(states["Unknown"], 1);
  idx.OnNodeDeleted("c");
  EXPECT_EQ(idx.CountsFor("p", sel).matched, 2);
}

}  // namespace
}  // namespace gg::op

namespace gg::op {
namespace {

// The brake counts GPUs as well as nodes: every DeviceTaintRule of ours is a device start,
// and a node fenced only at device level is a node under remediation.
TEST(FleetIndexTest, BrakeInputCountsDeviceFences) {
  FleetIndex idx;
  api::LabelSelector sel;
  remediation::RemediationRecord r;
  r.occurrence = "occ-1";
  r.policy = "p";
  r.started_at = WallTime(std::chrono::seconds(1000));
  for (const char* g : {"GPU-1", "GPU-2"}) {
    remediation::DeviceTaintRecord d;
    d.gpu_uuid = g;
    d.effect = "NoSchedule";
    d.since = WallTime(std::chrono::seconds(1000));
    r.device_taints.push_back(d);
  }
  idx.OnNode(MakeNode("a", "1", r));
  remediation::RemediationRecord dry = r;
  dry.dry_run = true;  // decided, not done: counts nothing
  idx.OnNode(MakeNode("b", "2", dry));
  auto in = idx.BrakeInputFor("p", sel);
  EXPECT_EQ(in.remediating_nodes, 1);
  EXPECT_EQ(in.device_starts.size(), 2u);
  api::SafetySpec safety;
  safety.max_unhealthy = {100, true};
  safety.max_devices_per_hour = 3;
  auto d = remediation::CheckBrake(safety, in, WallTime(std::chrono::seconds(1100)));
  EXPECT_TRUE(d.allow_new_device);
  EXPECT_EQ(d.devices_left, 1);
  // A third GPU fenced on the same node: the device budget is spent, the node budget is not.
  remediation::DeviceTaintRecord third;
  third.gpu_uuid = "GPU-3";
  third.since = WallTime(std::chrono::seconds(1050));
  r.device_taints.push_back(third);
  EXPECT_TRUE(idx.OnNode(MakeNode("a", "3", r)));  // other nodes' decisions change
  d = remediation::CheckBrake(safety, idx.BrakeInputFor("p", sel), WallTime(std::chrono::seconds(1100)));
  EXPECT_FALSE(d.allow_new_device);
  EXPECT_EQ(d.devices_left, 0);
  EXPECT_TRUE(d.allow_new_node);
}

}  // namespace
}  // namespace gg::op
