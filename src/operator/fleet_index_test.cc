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
  d = remediation::CheckBrake(safety, idx.BrakeInputFor("p", sel),
                              WallTime(std::chrono::seconds(1100)));
  EXPECT_FALSE(d.allow_new_device);
  EXPECT_EQ(d.devices_left, 0);
  EXPECT_TRUE(d.allow_new_node);
}

}  // namespace
}  // namespace gg::op

namespace gg::op {
namespace {

// The counts are kept incrementally: every path that changes a node (labels, exclusion,
// record, verdicts, deletion) must leave them equal to a recount.
TEST(FleetIndexTest, IncrementalCountsFollowEveryChange) {
  FleetIndex idx;
  api::LabelSelector gpu;
  gpu.match_labels["nvidia.com/gpu.present"] = "true";
  api::LabelSelector zone_a;
  zone_a.match_expressions.push_back({"zone", "In", {"a"}});
  for (int i = 0; i < 6; ++i) idx.OnNode(MakeNode("n" + std::to_string(i), std::to_string(i + 1)));
  EXPECT_EQ(idx.CountsFor("p", gpu).matched, 6);
  EXPECT_EQ(idx.CountsFor("p", zone_a).matched, 0);  // first use: one scan
  k8s::Node n1 = MakeNode("n1", "10");
  n1.meta.labels.Set("zone", "a");
  idx.OnNode(n1);  // label change: kept current without a scan
  EXPECT_EQ(idx.CountsFor("p", zone_a).matched, 1);
  k8s::Node n2 = MakeNode("n2", "11");
  n2.meta.labels.Erase("nvidia.com/gpu.present");
  idx.OnNode(n2);
  EXPECT_EQ(idx.CountsFor("p", gpu).matched, 5);

  idx.SetVerdicts("n0", {{"p", policy::HealthState::kUnhealthy}}, "");
  idx.SetVerdicts(
      "n1", {{"p", policy::HealthState::kHealthy}, {"q", policy::HealthState::kUnknown}}, "p");
  idx.OnNode(MakeNode("n0", "12", Fenced("p", true)));
  auto c = idx.CountsFor("p", gpu);
  EXPECT_EQ(c.unhealthy, 1);
  EXPECT_EQ(c.healthy, 1);
  EXPECT_EQ(c.remediating, 1);
  EXPECT_EQ(c.braked, 1);
  EXPECT_EQ(idx.CountsFor("q", gpu).unknown, 1);
  auto st = idx.StateCounts();
  EXPECT_EQ(st["Unhealthy"], 1);
  EXPECT_EQ(st["Unknown"], 1);  // n1's worst state
  EXPECT_EQ(st["Healthy"], 0);
  EXPECT_EQ(st["Remediating"], 1);

  // Excluded: out of the counts and the matched total, still held by the brake (our fence).
  idx.SetExcluded("n0", true);
  c = idx.CountsFor("p", gpu);
  EXPECT_EQ(c.matched, 4);
  EXPECT_EQ(c.unhealthy, 0);
  EXPECT_EQ(c.remediating, 0);
  EXPECT_EQ(idx.StateCounts()["Excluded"], 1);
  EXPECT_EQ(idx.BrakeInputFor("p", gpu).remediating_nodes, 1);
  idx.SetExcluded("n0", false);
  EXPECT_EQ(idx.CountsFor("p", gpu).matched, 5);
  EXPECT_EQ(idx.CountsFor("p", gpu).remediating, 1);

  // Verdicts change and go; the fence is released; nodes are deleted.
  idx.SetVerdicts("n1", {{"p", policy::HealthState::kHealthy}}, "");
  EXPECT_EQ(idx.CountsFor("q", gpu).unknown, 0);
  EXPECT_EQ(idx.CountsFor("p", gpu).braked, 0);
  idx.ApplyOwnRecord("n0", remediation::RemediationRecord{});
  EXPECT_EQ(idx.BrakeInputFor("p", gpu).remediating_nodes, 0);
  idx.OnNodeDeleted("n0");
  idx.OnNodeDeleted("n1");
  c = idx.CountsFor("p", gpu);
  EXPECT_EQ(c.matched, 3);
  EXPECT_EQ(c.unhealthy + c.healthy + c.unknown + c.remediating + c.braked, 0);
  EXPECT_EQ(idx.CountsFor("p", zone_a).matched, 0);
  st = idx.StateCounts();
  for (const auto& [k, v] : st) EXPECT_EQ(v, 0) << k;
}

TEST(FleetIndexTest, SelectorMatchesLabelMapLikeTheMapForm) {
  k8s::LabelMap packed{{"a", "1"}, {"b", "2"}};
  std::map<std::string, std::string> map{{"a", "1"}, {"b", "2"}};
  std::vector<api::LabelSelector> sels(7);
  sels[1].match_labels["a"] = "1";
  sels[2].match_labels["a"] = "2";
  sels[3].match_expressions.push_back({"b", "In", {"3", "2"}});
  sels[4].match_expressions.push_back({"b", "NotIn", {"2"}});
  sels[5].match_expressions.push_back({"c", "DoesNotExist", {}});
  sels[6].match_expressions.push_back({"c", "Bogus", {}});
  for (std::size_t i = 0; i < sels.size(); ++i) {
    EXPECT_EQ(SelectorMatches(sels[i], packed), sels[i].Matches(map)) << i;
  }
}

}  // namespace
}  // namespace gg::op
