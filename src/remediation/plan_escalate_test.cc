// Plan() and remediation.escalate: one remediation object per occurrence once our drain has
// finished (Done or Blocked), recorded as ours, deleted on recovery, exclusion or release;
// never in dry run, never before the drain ends, never without the field.
#include <gtest/gtest.h>

#include "api/gpu_node_health.h"
#include "remediation/plan.h"

namespace gg::remediation {
namespace {

using api::Action;
using policy::HealthState;
using policy::Verdict;
using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

Verdict Drain() {
  Verdict v;
  v.policy = "gpu";
  v.state = HealthState::kUnhealthy;
  v.action = Action::kDrain;
  v.reason = "RulesMatched";
  v.message = "fatal-xid: GPU 3: Xid 79";
  v.evidence.push_back({"fatal-xid", Action::kDrain, 3, "GPU-3", "GPU 3", true});
  v.bad_gpus = {"GPU-3"};
  v.node_wide = true;
  v.memory.state = HealthState::kUnhealthy;
  v.memory.since = kNow;
  return v;
}

Verdict Healthy(bool recovered) {
  Verdict v;
  v.policy = "gpu";
  v.state = HealthState::kHealthy;
  v.reason = "GPUsHealthy";
  v.message = "8 GPU(s) healthy";
  v.recovered = recovered;
  v.memory.state = HealthState::kHealthy;
  v.memory.since = kNow;
  return v;
}

api::EscalationTemplate Tmpl() {
  return {"remediation.example.com/v1alpha1", "RebootRemediationTemplate", "ops", "reboot"};
}

PolicyRemediation Pol(bool escalate = true) {
  PolicyRemediation p;
  p.policy = "gpu";
  if (escalate) p.remediation.escalate = Tmpl();
  return p;
}

NodeView Node() {
  NodeView n;
  n.name = "node-a";
  return n;
}

RemediationRecord Record(const NodeView& n) {
  auto r = DecodeRecord(n.record_annotation.value_or(""));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : RemediationRecord{};
}

// Fences and starts the drain, then records the drain's outcome as the operator does.
NodeView Drained(const PolicyRemediation& pol, bool done = true) {
  NodeView n = ApplyChange(Node(), Plan(Drain(), Node(), pol, BrakeAllowAll(), kNow));
  RemediationRecord r = Record(n);
  if (done) {
    MarkDrainCompleted(r, kNow + minutes(1));
  } else {
    MarkDrainBlocked(r, "pod a/b: PDB", kNow + minutes(1));
  }
  n.record_annotation = EncodeRecord(r);
  return n;
}

bool HasEvent(const NodeChange& c, std::string_view reason) {
  for (const auto& e : c.events) {
    if (e.reason == reason) return true;
  }
  return false;
}

TEST(PlanEscalate, NothingBeforeTheDrainFinishes) {
  NodeChange first = Plan(Drain(), Node(), Pol(), BrakeAllowAll(), kNow);
  EXPECT_FALSE(first.create_escalation);
  NodeView n = ApplyChange(Node(), first);
  NodeChange again = Plan(Drain(), n, Pol(), BrakeAllowAll(), kNow + seconds(30));
  EXPECT_FALSE(again.create_escalation);
  EXPECT_FALSE(Record(n).escalation);
}

TEST(PlanEscalate, CreatedOnceAfterTheDrainThenDeletedOnRecovery) {
  NodeView n = Drained(Pol());
  NodeChange c = Plan(Drain(), n, Pol(), BrakeAllowAll(), kNow + minutes(2));
  ASSERT_TRUE(c.create_escalation);
  EXPECT_EQ(*c.create_escalation, Tmpl());
  EXPECT_TRUE(HasEvent(c, events::kRemediationEscalated));
  n = ApplyChange(n, c);
  auto esc = Record(n).escalation;
  ASSERT_TRUE(esc);
  EXPECT_EQ(esc->kind, "RebootRemediation");
  EXPECT_EQ(esc->api_version, "remediation.example.com/v1alpha1");
  EXPECT_EQ(esc->namespace_, "ops");
  EXPECT_EQ(esc->name, "node-a");
  // Once per occurrence: later passes (still faulty, then healthy but not yet recovered) keep it.
  EXPECT_TRUE(Plan(Drain(), n, Pol(), BrakeAllowAll(), kNow + minutes(3)).Empty());
  NodeChange hold = Plan(Healthy(false), n, Pol(), BrakeAllowAll(), kNow + minutes(4));
  EXPECT_FALSE(hold.create_escalation);
  EXPECT_FALSE(hold.delete_escalation);
  n = ApplyChange(n, hold);
  // Recovery deletes exactly what was created and forgets it.
  NodeChange rec = Plan(Healthy(true), n, Pol(), BrakeAllowAll(), kNow + minutes(20));
  ASSERT_TRUE(rec.delete_escalation);
  EXPECT_EQ(*rec.delete_escalation, *esc);
  n = ApplyChange(n, rec);
  EXPECT_FALSE(Record(n).escalation);
  EXPECT_FALSE(Record(n).Active());
  EXPECT_TRUE(Plan(Healthy(true), n, Pol(), BrakeAllowAll(), kNow + minutes(21)).Empty());
}

TEST(PlanEscalate, BlockedDrainEscalatesToo) {
  NodeView n = Drained(Pol(), /*done=*/false);
  EXPECT_TRUE(Plan(Drain(), n, Pol(), BrakeAllowAll(), kNow + minutes(2)).create_escalation);
}

TEST(PlanEscalate, NoFieldOrDryRunCreatesNothing) {
  NodeView n = Drained(Pol(false));
  EXPECT_FALSE(Plan(Drain(), n, Pol(false), BrakeAllowAll(), kNow + minutes(2)).create_escalation);
  PolicyRemediation dry = Pol();
  dry.dry_run = true;
  NodeView d = ApplyChange(Node(), Plan(Drain(), Node(), dry, BrakeAllowAll(), kNow));
  EXPECT_FALSE(Plan(Drain(), d, dry, BrakeAllowAll(), kNow + minutes(2)).create_escalation);
}

TEST(PlanEscalate, ExclusionAndReleaseTakeItBack) {
  NodeView n = Drained(Pol());
  n = ApplyChange(n, Plan(Drain(), n, Pol(), BrakeAllowAll(), kNow + minutes(2)));
  ASSERT_TRUE(Record(n).escalation);
  PolicyRemediation excluded = Pol();
  excluded.governance = Governance::kExcluded;
  EXPECT_TRUE(Plan(Drain(), n, excluded, BrakeAllowAll(), kNow + minutes(3)).delete_escalation);
  // `kubectl gpu-guardian release` cancels the occurrence; the next pass deletes the object
  // and does not create another while the same fault lasts.
  NodeView rel = ApplyChange(n, PlanRelease(n, "reseated", kNow + minutes(3)));
  EXPECT_TRUE(HoldsOurs(rel, Record(rel)));
  NodeChange next = Plan(Drain(), rel, Pol(), BrakeAllowAll(), kNow + minutes(4));
  EXPECT_TRUE(next.delete_escalation);
  EXPECT_FALSE(next.create_escalation);
}

TEST(PlanEscalate, RecordRoundTripsTheEscalation) {
  RemediationRecord r;
  r.occurrence = "node-a-1";
  r.escalation = EscalationRecord{"g.example.com/v1", "FooRemediation", "ns", "node-a"};
  auto back = DecodeRecord(EncodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(DecodeRecord(R"({"v":1,"escalation":{"kind":"X"}})").ok());
  EXPECT_FALSE(DecodeRecord(R"({"v":1,"escalation":"x"})").ok());
}

}  // namespace
}  // namespace gg::remediation
