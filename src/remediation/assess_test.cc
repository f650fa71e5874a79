// Assess + Plan(NodeInput): the whole decision from what the caches hold — the exclude label
// decided here only, policy resolution, a finished drain's outcome folded into the record.
#include <gtest/gtest.h>

#include "api/test_reports.h"
#include "remediation/plan.h"

namespace gg::remediation {
namespace {

using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

api::GpuHealthPolicy Pol(std::string name, api::Action action) {
  api::GpuHealthPolicy p;
  p.name = std::move(name);
  p.spec = api::DefaultPolicySpec();
  api::Rule r;
  r.name = "fatal-xid";
  r.xid = api::XidMatcher{{}, {79, 48}, {}, false};
  r.action = action;
  p.spec.rules = {r};
  return p;
}

// `xid`: Xid 79 on GPU 2 (the node is fenced: a GPU off the bus needs a node reboot), or with
// `confined` Xid 48 (a double-bit ECC error: a GPU reset is enough, device-level may do).
NodeInput Input(const std::vector<const api::GpuHealthPolicy*>& policies, bool xid,
                bool confined = false) {
  NodeInput in;
  in.node.name = "node-a";
  auto r = api::testing::HealthyReport("node-a", kNow, 8);
  if (xid && confined) api::testing::AddXid(r, 48, 2, "Memory", "RESET_GPU", "DBE");
  if (xid && !confined) api::testing::AddXid(r, 79, 2);
  in.report = r;
  in.policies = policies;
  return in;
}

TEST(ExcludedByLabel, OnlyTrueExcludes) {
  EXPECT_TRUE(ExcludedByLabel("true"));
  EXPECT_FALSE(ExcludedByLabel("false"));
  EXPECT_FALSE(ExcludedByLabel("True"));
  EXPECT_FALSE(ExcludedByLabel(std::nullopt));
  EXPECT_FALSE(ExcludedByLabel(""));
}

TEST(Assess, ExcludedNodeIsNeitherEvaluatedNorChanged) {
  auto p = Pol("default", api::Action::kDrain);
  NodeInput in = Input({&p}, true);
  in.exclude_label = "true";
  Assessment a = Assess(in, kNow);
  EXPECT_TRUE(a.excluded);
  EXPECT_FALSE(a.verdict.has_value());
  NodeChange c = Plan(in, a, Lookups{}, kNow);
  EXPECT_TRUE(c.excluded);
  EXPECT_TRUE(c.stop_drain);
  EXPECT_TRUE(c.Empty());
}

// Fences the node under `p` and returns it as the caches then show it.
NodeInput Fenced(const api::GpuHealthPolicy& p, bool xid) {
  NodeInput in = Input({&p}, true);
  in.node = ApplyChange(in.node, Plan(in, Assess(in, kNow), Lookups{}, kNow));
  NodeInput out = Input({}, xid);
  out.node = in.node;
  return out;
}

TEST(Assess, ExcludedFencedNodeIsReleasedAtOnce) {
  auto p = Pol("default", api::Action::kDrain);
  NodeInput in = Fenced(p, true);
  ASSERT_TRUE(in.node.unschedulable);
  in.policies = {&p};
  in.exclude_label = "true";
  Assessment a = Assess(in, kNow);
  NodeChange c = Plan(in, a, Lookups{}, kNow);
  EXPECT_TRUE(c.excluded);
  EXPECT_TRUE(c.stop_drain);
  EXPECT_EQ(c.unschedulable, std::optional(false));
  EXPECT_TRUE(c.remove_taint);
  ASSERT_TRUE(c.condition.has_value());
  EXPECT_EQ(c.condition->reason, "Excluded");
  in.node = ApplyChange(in.node, c);
  EXPECT_TRUE(Plan(in, Assess(in, kNow), Lookups{}, kNow).Empty()) << "then nothing more";
}

TEST(Assess, UngovernedNodeIsJudgedByTheRecordedHealthyForAndNeverFencedAnew) {
  auto p = Pol("default", api::Action::kCordon);
  p.spec.recovery.healthy_for = std::chrono::minutes(4);
  NodeInput in = Fenced(p, false);  // policy gone, the report healthy
  Assessment a = Assess(in, kNow);
  ASSERT_TRUE(a.ungoverned);
  ASSERT_TRUE(a.verdict.has_value());
  EXPECT_FALSE(a.MayStartFence());
  EXPECT_EQ(a.policy->name, "default");
  EXPECT_EQ(a.policy->spec.recovery.healthy_for, std::chrono::minutes(4));
  NodeChange c = Plan(in, a, Lookups{}, kNow);
  EXPECT_FALSE(c.unschedulable.has_value()) << "held";
  ASSERT_TRUE(c.condition.has_value());
  EXPECT_EQ(c.condition->reason, "Ungoverned");
  EXPECT_EQ(c.events.size(), 1u);
  in.node = ApplyChange(in.node, c);
  for (auto [after, released] :
       {std::pair{std::chrono::minutes(3), false}, std::pair{std::chrono::minutes(4), true}}) {
    NodeInput later = in;
    later.report = api::testing::HealthyReport("node-a", kNow + after, 8);
    NodeChange d = Plan(later, Assess(later, kNow + after), Lookups{}, kNow + after);
    EXPECT_EQ(d.unschedulable == std::optional(false), released) << after.count() << "m";
  }
}

TEST(Assess, UngovernedWithoutAReportHolds) {
  auto p = Pol("default", api::Action::kCordon);
  NodeInput in = Fenced(p, false);
  in.report = NotFoundError("no report");
  const WallTime later = kNow + std::chrono::hours(3);
  NodeChange c = Plan(in, Assess(in, later), Lookups{}, later);
  EXPECT_FALSE(c.unschedulable.has_value());
  EXPECT_FALSE(c.remove_taint);
}

TEST(Assess, NoPolicyNoDecision) {
  NodeInput in = Input({}, true);
  Assessment a = Assess(in, kNow);
  EXPECT_FALSE(a.verdict.has_value());
  EXPECT_TRUE(Plan(in, a, Lookups{}, kNow).Empty());
}

TEST(Assess, MostSevereActionWinsAndEveryMemoryIsKept) {
  auto taint = Pol("a-taint", api::Action::kTaint);
  auto drain = Pol("b-drain", api::Action::kDrain);
  NodeInput in = Input({&taint, &drain}, true);
  Assessment a = Assess(in, kNow);
  ASSERT_TRUE(a.verdict.has_value());
  EXPECT_EQ(a.policy->name, "b-drain");
  EXPECT_TRUE(a.MayStartFence());
  EXPECT_EQ(a.states.size(), 2u);
  NodeChange c = Plan(in, a, Lookups{}, kNow);
  ASSERT_TRUE(c.record.has_value());
  EXPECT_EQ(c.record->policy, "b-drain");
  EXPECT_EQ(c.record->memory.size(), 2u);
  EXPECT_TRUE(c.drain.has_value());
  EXPECT_TRUE(c.forget_drain) << "no drain recorded yet: a stale outcome is dropped";
}

TEST(Assess, FinishedDrainIsFoldedIntoTheRecord) {
  auto p = Pol("default", api::Action::kDrain);
  NodeInput in = Input({&p}, true);
  NodeChange first = Plan(in, Assess(in, kNow), Lookups{}, kNow);
  ASSERT_TRUE(first.record.has_value());
  in.node = ApplyChange(in.node, first);
  in.drain = DrainOutcome{false, true, "Blocked", "drain timed out with 1 pod(s) left; ml/a: PDB"};
  Assessment a = Assess(in, kNow + seconds(60));
  NodeChange c = Plan(in, a, Lookups{}, kNow + seconds(60));
  ASSERT_TRUE(c.record.has_value());
  EXPECT_EQ(c.record->drain.phase, DrainPhase::kBlocked);
  EXPECT_EQ(c.drain_recorded, "Blocked");
  EXPECT_FALSE(c.drain.has_value()) << "a blocked drain is not started again";
  ASSERT_FALSE(c.events.empty());
  EXPECT_EQ(c.events.back().reason, events::kDrainBlocked);
  EXPECT_EQ(c.events.back().type, events::EventType::kWarning);
  // Recorded: the next pass forgets the runner's outcome and decides nothing new.
  in.node = ApplyChange(in.node, c);
  NodeChange again = Plan(in, Assess(in, kNow + seconds(90)), Lookups{}, kNow + seconds(90));
  EXPECT_TRUE(again.forget_drain);
  EXPECT_TRUE(again.drain_recorded.empty());
}

TEST(Assess, GpusToFenceSkipsTheOnesAlreadyFenced) {
  auto p = Pol("default", api::Action::kTaint);
  p.spec.remediation.device_level = api::DeviceLevelMode::kAuto;
  NodeInput in = Input({&p}, true, /*confined=*/true);
  Assessment a = Assess(in, kNow);
  ASSERT_EQ(a.GpusToFence().size(), 1u);
  Lookups dra;
  dra.dra_devices = true;
  NodeChange c = Plan(in, a, dra, kNow);
  ASSERT_EQ(c.create_device_taints.size(), 1u);
  in.node = ApplyChange(in.node, c);
  Assessment b = Assess(in, kNow + seconds(5));
  EXPECT_TRUE(b.GpusToFence().empty());
  EXPECT_TRUE(b.HoldsDeviceTaints());
}

}  // namespace
}  // namespace gg::remediation
