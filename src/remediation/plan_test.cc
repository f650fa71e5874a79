// Plan(): world-state tables — fence, drain, admin cordon/taint untouched, admin uncordon
// cancels, record removal re-onboards, dry run, paused, exclude, recovery, brake, DRA, and
// idempotency (planning again on the applied result yields an empty change). The exclude
// label is decided before planning (Assess): see assess_test.cc.
#include "remediation/plan.h"

#include <gtest/gtest.h>

#include "api/gpu_node_health.h"

namespace gg::remediation {
namespace {

using api::Action;
using policy::HealthState;
using policy::Verdict;
using std::chrono::minutes;
using std::chrono::seconds;

const WallTime kNow = WallTime(seconds(1'800'000'000));

Verdict Bad(Action a, std::vector<std::string> gpus = {"GPU-3"}, bool node_wide = true) {
  Verdict v;
  v.policy = "default";
  v.state = HealthState::kUnhealthy;
  v.action = a;
  v.reason = "RulesMatched";
  v.message = "fatal-xid: GPU 3 (GPU-3): Xid 79 (fallen off the bus, RESTART_BM) x1 in 10m";
  for (const auto& g : gpus) v.evidence.push_back({"fatal-xid", a, 3, g, "GPU 3", node_wide});
  v.bad_gpus = gpus;
  v.node_wide = node_wide;
  v.memory.state = HealthState::kUnhealthy;
  v.memory.since = kNow;
  return v;
}

Verdict Healthy(bool recovered) {
  Verdict v;
  v.policy = "default";
  v.state = HealthState::kHealthy;
  v.reason = "GPUsHealthy";
  v.message = "8 GPU(s) healthy";
  v.recovered = recovered;
  v.memory.state = HealthState::kHealthy;
  v.memory.since = kNow;
  return v;
}

Verdict Unknown() {
  Verdict v;
  v.policy = "default";
  v.state = HealthState::kUnknown;
  v.action = Action::kEvent;
  v.reason = "StaleReport";
  v.message = "Last agent heartbeat is older than 15m";
  return v;
}

PolicyRemediation Pol() {
  PolicyRemediation p;
  p.policy = "default";
  return p;
}

NodeView Node() {
  NodeView n;
  n.name = "node-a";
  return n;
}

bool HasEvent(const NodeChange& p, const std::string& reason) {
  for (const auto& e : p.events) {
    if (e.reason == reason) return true;
  }
  return false;
}
const NodeTaint* OurTaint(const NodeView& n) {
  for (const auto& t : n.taints) {
    if (t.key == api::kTaintKey) return &t;
  }
  return nullptr;
}
RemediationRecord Record(const NodeView& n) {
  EXPECT_TRUE(n.record_annotation.has_value());
  auto r = DecodeRecord(n.record_annotation.value_or(""));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : RemediationRecord{};
}

// Plans, applies, and checks that planning again on the result changes nothing.
NodeView Step(const Verdict& v, const NodeView& n, const PolicyRemediation& pol = Pol(),
              const BrakeDecision& brake = BrakeAllowAll(), WallTime now = kNow,
              NodeChange* out = nullptr) {
  NodeChange p = Plan(v, n, pol, brake, now);
  NodeView after = ApplyChange(n, p);
  NodeChange again = Plan(v, after, pol, brake, now + seconds(5));
  EXPECT_TRUE(again.Empty()) << "not idempotent"
                             << (again.events.empty() ? "" : ": " + again.events[0].message);
  if (out) *out = p;
  return after;
}

TEST(Plan, CordonFencesNodeAndIsIdempotent) {
  NodeChange p;
  NodeView n = Step(Bad(Action::kCordon), Node(), Pol(), BrakeAllowAll(), kNow, &p);
  ASSERT_TRUE(p.record.has_value());  // intent and ownership
  EXPECT_TRUE(n.unschedulable);
  ASSERT_NE(OurTaint(n), nullptr);
  EXPECT_EQ(OurTaint(n)->effect, "NoSchedule");
  EXPECT_EQ(OurTaint(n)->value, kTaintValueCordoned);
  EXPECT_EQ(n.gpu_condition->status, "False");
  EXPECT_EQ(n.gpu_condition->reason, "RulesMatched");
  EXPECT_TRUE(HasEvent(p, events::kGPUUnhealthy));
  EXPECT_TRUE(HasEvent(p, events::kNodeCordoned));
  EXPECT_TRUE(HasEvent(p, events::kNodeTainted));
  EXPECT_TRUE(p.starts_node_fence);
  RemediationRecord r = Record(n);
  EXPECT_TRUE(r.tainted);
  EXPECT_TRUE(r.cordoned);
  EXPECT_EQ(r.action, Action::kCordon);
  EXPECT_EQ(r.occurrence, "node-a-1800000000");
  EXPECT_EQ(r.policy, "default");
  EXPECT_EQ(r.memory.at("default").state, HealthState::kUnhealthy);
}

TEST(Plan, TaintOnlyAndNoExecuteEffect) {
  auto pol = Pol();
  pol.remediation.taint_effect = api::TaintEffect::kNoExecute;
  NodeView n = Step(Bad(Action::kTaint), Node(), pol);
  EXPECT_FALSE(n.unschedulable);
  ASSERT_NE(OurTaint(n), nullptr);
  EXPECT_EQ(OurTaint(n)->effect, "NoExecute");
  EXPECT_EQ(OurTaint(n)->value, kTaintValueTainted);
}

TEST(Plan, DrainStartsOnceThenContinues) {
  NodeChange p = Plan(Bad(Action::kDrain), Node(), Pol(), BrakeAllowAll(), kNow);
  ASSERT_TRUE(p.drain.has_value());
  EXPECT_TRUE(p.drain->start);
  EXPECT_EQ(p.drain->deadline, kNow + std::chrono::hours(1));
  EXPECT_TRUE(p.starts_drain);
  NodeView n = ApplyChange(Node(), p);
  NodeChange again = Plan(Bad(Action::kDrain), n, Pol(), BrakeAllowAll(), kNow + minutes(1));
  EXPECT_TRUE(again.Empty());
  ASSERT_TRUE(again.drain.has_value());
  EXPECT_FALSE(again.drain->start);  // a restarted operator continues, never restarts
  // The drainer reports completion: nothing more to do.
  RemediationRecord r = Record(n);
  MarkDrainCompleted(r, kNow + minutes(2));
  n.record_annotation = EncodeRecord(r);
  NodeChange done = Plan(Bad(Action::kDrain), n, Pol(), BrakeAllowAll(), kNow + minutes(3));
  EXPECT_TRUE(done.Empty());
  EXPECT_FALSE(done.drain.has_value());
}

TEST(Plan, AdminCordonAndTaintAreNeverUndone) {
  NodeView admin = Node();
  admin.unschedulable = true;  // cordoned by an admin
  admin.taints = {{"example.com/maintenance", "", "NoSchedule"}};
  NodeView n = Step(Bad(Action::kCordon), admin);
  RemediationRecord r = Record(n);
  EXPECT_FALSE(r.cordoned);  // not ours
  EXPECT_TRUE(r.tainted);
  EXPECT_EQ(OurTaint(n)->value, kTaintValueTainted);
  // Recovery removes only our taint; the admin's cordon and taint stay.
  n = Step(Healthy(true), n);
  EXPECT_TRUE(n.unschedulable);
  EXPECT_EQ(OurTaint(n), nullptr);
  ASSERT_EQ(n.taints.size(), 1u);
  EXPECT_EQ(n.taints[0].key, "example.com/maintenance");
}

TEST(Plan, AdminUncordonCancelsTheOccurrence) {
  NodeView n = Step(Bad(Action::kDrain), Node());
  n.unschedulable = false;  // kubectl uncordon
  NodeChange p;
  n = Step(Bad(Action::kDrain), n, Pol(), BrakeAllowAll(), kNow + minutes(1), &p);
  EXPECT_FALSE(n.unschedulable);  // not re-cordoned
  EXPECT_EQ(OurTaint(n), nullptr);
  EXPECT_TRUE(p.stop_drain);
  EXPECT_TRUE(HasEvent(p, events::kRemediationSkipped));
  EXPECT_TRUE(Record(n).cancelled);
  // A new fault (another GPU) is a new occurrence: fenced again.
  n = Step(Bad(Action::kCordon, {"GPU-3", "GPU-5"}), n, Pol(), BrakeAllowAll(), kNow + minutes(2),
           &p);
  EXPECT_TRUE(n.unschedulable);
  EXPECT_FALSE(Record(n).cancelled);
  EXPECT_EQ(Record(n).occurrence, "node-a-" + std::to_string(1'800'000'000 + 120));
  // Healthy closes a cancelled occurrence without hysteresis; nothing is left behind.
  NodeView c = Step(Bad(Action::kCordon), Node());
  c.unschedulable = false;
  c = Step(Bad(Action::kCordon), c);
  c = Step(Healthy(false), c);
  EXPECT_FALSE(Record(c).Active());
}

TEST(Plan, RecordRemovalReOnboards) {
  NodeView n = Step(Bad(Action::kCordon), Node());
  // Still bad: a new occurrence takes over the existing fences (no flapping).
  NodeView removed = n;
  removed.record_annotation.reset();
  NodeChange p;
  NodeView still =
      Step(Bad(Action::kCordon), removed, Pol(), BrakeAllowAll(), kNow + minutes(3), &p);
  EXPECT_TRUE(still.unschedulable);
  EXPECT_NE(OurTaint(still), nullptr);
  EXPECT_EQ(Record(still).occurrence, "node-a-" + std::to_string(1'800'000'000 + 180));
  EXPECT_TRUE(Record(still).cordoned);
  EXPECT_TRUE(HasEvent(p, events::kGPUUnhealthy));
  // Healthy: our taint and our cordon go at once (no record, no hysteresis to honour).
  NodeView healthy = Step(Healthy(false), removed);
  EXPECT_FALSE(healthy.unschedulable);
  EXPECT_EQ(OurTaint(healthy), nullptr);
  // Garbage in the annotation is treated like a removed record.
  NodeView garbage = n;
  garbage.record_annotation = "{not json";
  healthy = Step(Healthy(false), garbage);
  EXPECT_FALSE(healthy.unschedulable);
}

TEST(Plan, RecoveryWaitsForHealthyForThenUndoesOnlyOurs) {
  NodeView n = Step(Bad(Action::kCordon), Node());
  NodeChange p;
  NodeView held = Step(Healthy(false), n, Pol(), BrakeAllowAll(), kNow + minutes(1), &p);
  EXPECT_TRUE(held.unschedulable);  // hysteresis: still fenced
  EXPECT_NE(OurTaint(held), nullptr);
  EXPECT_EQ(held.gpu_condition->status, "True");
  NodeView rec = Step(Healthy(true), held, Pol(), BrakeAllowAll(), kNow + minutes(11), &p);
  EXPECT_FALSE(rec.unschedulable);
  EXPECT_EQ(OurTaint(rec), nullptr);
  EXPECT_TRUE(HasEvent(p, events::kGPURecovered));
  EXPECT_TRUE(HasEvent(p, events::kNodeUncordoned));
  EXPECT_TRUE(p.ends_node_fence);
  RemediationRecord r = Record(rec);
  EXPECT_FALSE(r.Active());
  EXPECT_EQ(r.recovered_at, kNow + minutes(11));
  // A later fault is a fresh occurrence.
  NodeView again = Step(Bad(Action::kCordon), rec, Pol(), BrakeAllowAll(), kNow + minutes(20));
  EXPECT_TRUE(again.unschedulable);
}

TEST(Plan, DryRunDecidesRecordsAndChangesNothing) {
  auto pol = Pol();
  pol.dry_run = true;
  NodeChange p;
  NodeView n = Step(Bad(Action::kDrain), Node(), pol, BrakeAllowAll(), kNow, &p);
  EXPECT_FALSE(n.unschedulable);
  EXPECT_TRUE(n.taints.empty());
  EXPECT_FALSE(n.gpu_condition.has_value());
  EXPECT_FALSE(p.drain.has_value());
  for (const auto& e : p.events) EXPECT_EQ(e.message.rfind("dry run: ", 0), 0u) << e.message;
  EXPECT_TRUE(HasEvent(p, events::kGPUUnhealthy));
  RemediationRecord r = Record(n);
  EXPECT_TRUE(r.dry_run);
  EXPECT_EQ(r.action, Action::kDrain);
  EXPECT_FALSE(r.tainted);
  EXPECT_FALSE(r.cordoned);
}

TEST(Plan, PausedDoesNothing) {
  auto pol = Pol();
  pol.paused = true;
  NodeChange p = Plan(Bad(Action::kDrain), Node(), pol, BrakeAllowAll(), kNow);
  EXPECT_TRUE(p.Empty());
  EXPECT_FALSE(p.drain.has_value());
}

TEST(Plan, EventsCarryTheCatalogType) {
  BrakeDecision brake;
  brake.allow_new_node = false;
  brake.reason = "maxUnhealthy 0";
  for (const auto& e : Plan(Bad(Action::kCordon), Node(), Pol(), brake, kNow).events) {
    EXPECT_EQ(e.type, events::TypeOfReason(e.reason)) << e.reason;
  }
  NodeChange p = Plan(Bad(Action::kCordon), Node(), Pol(), brake, kNow);
  ASSERT_TRUE(HasEvent(p, events::kRemediationSkipped));
  for (const auto& e : p.events) {
    if (e.reason == events::kRemediationSkipped) {
      EXPECT_EQ(e.type, events::EventType::kNormal);
    }
  }
}

TEST(Plan, BrakeHoldsBackNewFencesButNotRecovery) {
  BrakeDecision brake;
  brake.allow_new_node = false;
  brake.engaged = true;
  brake.reason = "maxUnhealthy 10% of 25 nodes allows 3; 3 under remediation";
  NodeChange p;
  NodeView n = Step(Bad(Action::kCordon), Node(), Pol(), brake, kNow, &p);
  EXPECT_TRUE(p.brake_blocked);
  EXPECT_FALSE(n.unschedulable);
  EXPECT_EQ(OurTaint(n), nullptr);
  EXPECT_EQ(n.gpu_condition->status, "False");  // the condition still tells the truth
  EXPECT_TRUE(HasEvent(p, events::kRemediationSkipped));
  // Released: the fence goes on.
  n = Step(Bad(Action::kCordon), n, Pol(), BrakeAllowAll(), kNow + minutes(1));
  EXPECT_TRUE(n.unschedulable);
  // Engaged again: recovery still proceeds.
  n = Step(Healthy(true), n, Pol(), brake, kNow + minutes(30));
  EXPECT_FALSE(n.unschedulable);
  // Drain budget: cordon happens, drain waits.
  BrakeDecision drains;
  drains.allow_new_drain = false;
  drains.reason = "maxConcurrentDrains 5 reached";
  NodeChange d = Plan(Bad(Action::kDrain), Node(), Pol(), drains, kNow);
  EXPECT_FALSE(d.drain.has_value());
  EXPECT_TRUE(ApplyChange(Node(), d).unschedulable);
}

TEST(Plan, DeviceLevelFencesOnlyTheBadGpu) {
  auto pol = Pol();
  pol.remediation.device_level = api::DeviceLevelMode::kAuto;
  NodeView dra = Node();
  dra.dra_devices = true;
  NodeChange p;
  NodeView n = Step(Bad(Action::kDrain, {"GPU-3"}, /*node_wide=*/false), dra, pol, BrakeAllowAll(),
                    kNow, &p);
  EXPECT_FALSE(n.unschedulable);
  EXPECT_EQ(OurTaint(n), nullptr);
  ASSERT_TRUE(!p.create_device_taints.empty());
  EXPECT_EQ(p.device_fences_started, 1);
  ASSERT_TRUE(p.drain.has_value());
  EXPECT_EQ(p.drain->gpu_uuids, std::vector<std::string>{"GPU-3"});
  EXPECT_EQ(Record(n).device_taints.size(), 1u);
  // Healthy but not yet recovered: the device fence is held, the node is not fenced.
  NodeView held = Step(Healthy(false), n, pol, BrakeAllowAll(), kNow + minutes(5), &p);
  EXPECT_EQ(OurTaint(held), nullptr);
  EXPECT_FALSE(held.unschedulable);
  ASSERT_TRUE(p.drain.has_value());
  EXPECT_EQ(p.drain->gpu_uuids, std::vector<std::string>{"GPU-3"});
  // Recovery removes the device taint.
  NodeChange rp;
  Step(Healthy(true), n, pol, BrakeAllowAll(), kNow + minutes(20), &rp);
  EXPECT_TRUE(!rp.delete_device_taints.empty());
  // Node-wide failure (GPU lost) on a DRA node still fences the node.
  NodeView nw = Step(Bad(Action::kCordon, {"GPU-3"}, /*node_wide=*/true), dra, pol);
  EXPECT_TRUE(nw.unschedulable);
}

TEST(Plan, UnknownRaisesConditionAndEventOnlyOnce) {
  NodeChange p;
  NodeView n = Step(Unknown(), Node(), Pol(), BrakeAllowAll(), kNow, &p);
  EXPECT_EQ(n.gpu_condition->status, "Unknown");
  EXPECT_TRUE(HasEvent(p, events::kGPUTelemetryLost));
  EXPECT_FALSE(n.unschedulable);
  EXPECT_TRUE(n.taints.empty());
  // Unknown on a fenced node holds the fence (never undoes on missing data).
  NodeView f = Step(Bad(Action::kCordon), Node());
  f = Step(Unknown(), f, Pol(), BrakeAllowAll(), kNow + minutes(1));
  EXPECT_TRUE(f.unschedulable);
  // Telemetry back and healthy.
  NodeChange back;
  Step(Healthy(true), n, Pol(), BrakeAllowAll(), kNow + minutes(2), &back);
  EXPECT_TRUE(HasEvent(back, events::kGPURecovered));
}

TEST(Plan, AlwaysHealthyNodeNeedsNoRecord) {
  Verdict v = Healthy(true);
  v.memory = {};
  NodeChange p;
  NodeView n = Step(v, Node(), Pol(), BrakeAllowAll(), kNow, &p);
  EXPECT_TRUE(p.condition.has_value());
  EXPECT_FALSE(p.WritesNode());
  EXPECT_TRUE(p.events.empty());
  EXPECT_FALSE(n.record_annotation.has_value());
  EXPECT_EQ(n.gpu_condition->status, "True");
}

TEST(Plan, EscalatesWithinAnOccurrenceButNeverDeescalates) {
  NodeView n = Step(Bad(Action::kTaint), Node());
  EXPECT_FALSE(n.unschedulable);
  n = Step(Bad(Action::kCordon), n, Pol(), BrakeAllowAll(), kNow + minutes(1));
  EXPECT_TRUE(n.unschedulable);
  EXPECT_EQ(OurTaint(n)->value, kTaintValueCordoned);
  n = Step(Bad(Action::kTaint), n, Pol(), BrakeAllowAll(), kNow + minutes(2));
  EXPECT_TRUE(n.unschedulable);
  EXPECT_EQ(Record(n).action, Action::kCordon);
}

}  // namespace
}  // namespace gg::remediation

namespace gg::remediation {
namespace {

PolicyRemediation DevicePol(api::DeviceTaintEffect effect = api::DeviceTaintEffect::kNoSchedule) {
  PolicyRemediation p;
  p.policy = "default";
  p.remediation.device_level = api::DeviceLevelMode::kAuto;
  p.remediation.device_taint_effect = effect;
  return p;
}
NodeView DraNode() {
  NodeView n;
  n.name = "node-a";
  n.dra_devices = true;
  return n;
}

TEST(PlanDeviceLevel, TaintCarriesPolicyEffectAndFiredRule) {
  for (auto [effect, name] : {std::pair{api::DeviceTaintEffect::kNoSchedule, "NoSchedule"},
                              std::pair{api::DeviceTaintEffect::kNoExecute, "NoExecute"}}) {
    NodeChange p = Plan(Bad(Action::kDrain, {"GPU-3"}, false), DraNode(), DevicePol(effect),
                        BrakeAllowAll(), kNow);
    auto adds = p.create_device_taints;
    ASSERT_EQ(adds.size(), 1u);
    EXPECT_EQ(adds[0].effect, name);
    EXPECT_EQ(adds[0].reason, "fatal-xid");    // the taint value: the rule that fired
    EXPECT_TRUE(p.drain.has_value()) << name;  // Drain: evict the pods holding the GPU
    NodeView n = ApplyChange(DraNode(), p);
    EXPECT_FALSE(n.unschedulable);
    EXPECT_EQ(OurTaint(n), nullptr);
    EXPECT_EQ(Record(n).device_taints[0].effect, name);
  }
}

TEST(PlanDeviceLevel, EffectNoneAnnouncesAndNeverDrains) {
  NodeChange p;
  NodeView n = Step(Bad(Action::kDrain, {"GPU-3"}, false), DraNode(),
                    DevicePol(api::DeviceTaintEffect::kNone), BrakeAllowAll(), kNow, &p);
  auto adds = p.create_device_taints;
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_EQ(adds[0].effect, "None");
  EXPECT_FALSE(p.drain.has_value());
  EXPECT_FALSE(p.starts_drain);
  EXPECT_FALSE(n.unschedulable);
  EXPECT_EQ(Record(n).drain.phase, DrainPhase::kNone);
}

TEST(PlanDeviceLevel, DeviceBudgetCountsEveryGpu) {
  BrakeDecision one = BrakeAllowAll();
  one.devices_left = 1;
  one.reason = "maxDevicesPerHour 4 reached (3 in the last hour)";
  NodeChange p =
      Plan(Bad(Action::kTaint, {"GPU-1", "GPU-3"}, false), DraNode(), DevicePol(), one, kNow);
  auto adds = p.create_device_taints;
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_EQ(adds[0].gpu_uuid, "GPU-1");
  EXPECT_TRUE(p.brake_blocked);
  EXPECT_TRUE(HasEvent(p, events::kRemediationSkipped));
  NodeView n = ApplyChange(DraNode(), p);
  EXPECT_EQ(Record(n).device_taints.size(), 1u);
  EXPECT_FALSE(n.unschedulable);

  // The node is fenced already (one GPU), yet its second GPU still needs a device slot.
  BrakeDecision none = one;
  none.devices_left = 0;
  none.allow_new_device = false;
  NodeChange held = Plan(Bad(Action::kTaint, {"GPU-1", "GPU-3"}, false), n, DevicePol(), none,
                         kNow + seconds(10));
  EXPECT_TRUE(held.create_device_taints.empty());
  EXPECT_TRUE(held.brake_blocked);
  EXPECT_FALSE(HasEvent(held, events::kRemediationSkipped));  // said once

  // A slot frees: the second GPU is fenced, the first is not created twice.
  NodeChange later =
      Plan(Bad(Action::kTaint, {"GPU-1", "GPU-3"}, false), n, DevicePol(), one, kNow + minutes(61));
  adds = later.create_device_taints;
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_EQ(adds[0].gpu_uuid, "GPU-3");
  EXPECT_FALSE(later.brake_blocked);
}

TEST(PlanDeviceLevel, NotDraOrOffFencesTheNode) {
  // No DRA devices on the node: node-level, whatever the policy says.
  NodeView plain = Step(Bad(Action::kCordon, {"GPU-3"}, false), Node(), DevicePol());
  EXPECT_TRUE(plain.unschedulable);
  EXPECT_TRUE(Record(plain).device_taints.empty());
  // deviceLevel Off on a DRA node: node-level.
  NodeView off = Step(Bad(Action::kCordon, {"GPU-3"}, false), DraNode(), Pol());
  EXPECT_TRUE(off.unschedulable);
  EXPECT_TRUE(Record(off).device_taints.empty());
}

TEST(PlanDeviceLevel, EscalationToNodeWideKeepsDeviceRulesUntilRecovery) {
  NodeChange p;
  NodeView n = Step(Bad(Action::kCordon, {"GPU-3"}, false), DraNode(), DevicePol());
  ASSERT_EQ(Record(n).device_taints.size(), 1u);
  // The same occurrence turns node-wide (the GPU falls off the bus): the node is fenced too.
  NodeView nw = Step(Bad(Action::kCordon, {"GPU-3"}, true), n, DevicePol(), BrakeAllowAll(),
                     kNow + minutes(1), &p);
  EXPECT_TRUE(nw.unschedulable);
  EXPECT_NE(OurTaint(nw), nullptr);
  EXPECT_FALSE(!p.delete_device_taints.empty());
  // Recovery undoes everything of ours, device rules included.
  NodeChange rp;
  NodeView back = Step(Healthy(true), nw, DevicePol(), BrakeAllowAll(), kNow + minutes(30), &rp);
  EXPECT_FALSE(back.unschedulable);
  EXPECT_EQ(OurTaint(back), nullptr);
  ASSERT_EQ(rp.delete_device_taints.size(), 1u);
  EXPECT_EQ(rp.delete_device_taints[0].gpu_uuid, "GPU-3");
  EXPECT_TRUE(Record(back).device_taints.empty());
}

// --- Repeat offenders, hand-backs and nodes no policy governs ---

PolicyRemediation Quarantining(int after, Duration within) {
  PolicyRemediation p = Pol();
  p.recovery.healthy_for = minutes(1);
  p.recovery.quarantine = {after, within};
  return p;
}

// One fault and its recovery (healthy past healthyFor) at `t`; returns the node after both.
NodeView FenceAndHeal(NodeView n, const PolicyRemediation& pol, WallTime t) {
  n = ApplyChange(n, Plan(Bad(Action::kCordon), n, pol, BrakeAllowAll(), t));
  return ApplyChange(n, Plan(Healthy(true), n, pol, BrakeAllowAll(), t + minutes(2)));
}

TEST(PlanQuarantine, ThirdFenceWithinTheWindowHoldsTheNodeUntilReleased) {
  const PolicyRemediation pol = Quarantining(3, std::chrono::hours(1));
  NodeView n = Node();
  n = FenceAndHeal(n, pol, kNow);
  n = FenceAndHeal(n, pol, kNow + minutes(10));
  EXPECT_FALSE(n.unschedulable) << "twice is not yet a repeat offender";
  NodeChange third = Plan(Bad(Action::kCordon), n, pol, BrakeAllowAll(), kNow + minutes(20));
  EXPECT_TRUE(HasEvent(third, events::kNodeQuarantined));
  EXPECT_EQ(third.condition->reason, "Quarantined");
  EXPECT_EQ(third.condition->status, "False");
  n = ApplyChange(n, third);
  // Healthy for far longer than healthyFor: held, and planning again changes nothing.
  n = Step(Healthy(true), n, pol, BrakeAllowAll(), kNow + std::chrono::hours(5));
  EXPECT_TRUE(n.unschedulable);
  EXPECT_NE(OurTaint(n), nullptr);
  EXPECT_EQ(n.gpu_condition->reason, "Quarantined");
  EXPECT_EQ(Record(n).fences.size(), 3u);
  // The hand-back: ours undone, quarantine lifted, history forgotten, who and why recorded.
  const auto memory_before = Record(n).memory;
  NodeChange rel = PlanRelease(n, "GPU replaced", kNow + std::chrono::hours(6));
  EXPECT_TRUE(HasEvent(rel, events::kNodeReleased));
  EXPECT_TRUE(HasEvent(rel, events::kNodeUncordoned));
  EXPECT_FALSE(rel.condition.has_value()) << "the operator writes the condition";
  n = ApplyChange(n, rel);
  EXPECT_FALSE(n.unschedulable);
  EXPECT_EQ(OurTaint(n), nullptr);
  RemediationRecord r = Record(n);
  EXPECT_FALSE(r.quarantined);
  EXPECT_TRUE(r.fences.empty());
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.released_reason, "GPU replaced");
  EXPECT_EQ(r.memory, memory_before) << "a hand-back decides nothing about health";
  // The same fault does not fence again; the occurrence closes once healthy.
  n = Step(Bad(Action::kCordon), n, pol, BrakeAllowAll(), kNow + std::chrono::hours(6));
  EXPECT_FALSE(n.unschedulable);
  EXPECT_TRUE(PlanRelease(ApplyChange(n, Plan(Healthy(true), n, pol, BrakeAllowAll(),
                                              kNow + std::chrono::hours(7))),
                          "again", kNow + std::chrono::hours(7))
                  .Empty())
      << "nothing of ours left to release";
}

TEST(PlanQuarantine, FencesOutsideTheWindowOrAfterZeroDoNotCount) {
  NodeView n = Node();
  const PolicyRemediation spread = Quarantining(3, minutes(30));
  for (int i = 0; i < 4; ++i) n = FenceAndHeal(n, spread, kNow + minutes(20) * i);
  EXPECT_FALSE(n.unschedulable) << "never three within 30m";
  EXPECT_EQ(Record(n).fences.size(), 4u);
  NodeView m = Node();
  const PolicyRemediation off = Quarantining(0, minutes(30));
  for (int i = 0; i < 12; ++i) m = FenceAndHeal(m, off, kNow + minutes(3) * i);
  EXPECT_FALSE(m.unschedulable) << "after 0: never";
  EXPECT_EQ(Record(m).fences.size(), kFenceHistoryMax) << "the history is bounded";
}

TEST(PlanQuarantine, DryRunFencesAreNotCounted) {
  PolicyRemediation pol = Quarantining(1, std::chrono::hours(1));
  pol.dry_run = true;
  NodeView n = Step(Bad(Action::kCordon), Node(), pol);
  EXPECT_FALSE(Record(n).quarantined);
  EXPECT_TRUE(Record(n).fences.empty());
}

TEST(PlanRelease, LeavesAnAdminCordonAndTaintAndReportsNothingToDoOnAPlainNode) {
  EXPECT_TRUE(PlanRelease(Node(), "why", kNow).Empty());
  NodeView n = Node();
  n.unschedulable = true;  // the administrator's
  n.taints = {{"maintenance", "", "NoSchedule"}};
  n = Step(Bad(Action::kCordon), n);
  NodeChange rel = PlanRelease(n, "done", kNow);
  n = ApplyChange(n, rel);
  EXPECT_TRUE(n.unschedulable);
  EXPECT_EQ(OurTaint(n), nullptr);
  ASSERT_EQ(n.taints.size(), 1u);
  EXPECT_EQ(n.taints[0].key, "maintenance");
  EXPECT_FALSE(HasEvent(rel, events::kNodeUncordoned));
}

TEST(PlanRelease, DeviceTaintsAndDrainAreLeftForTheOperatorToUndo) {
  PolicyRemediation pol = Pol();
  pol.remediation.device_level = api::DeviceLevelMode::kAuto;
  NodeView n = Node();
  n.dra_devices = true;
  n = ApplyChange(n, Plan(Bad(Action::kDrain, {"GPU-3"}, false), n, pol, BrakeAllowAll(), kNow));
  ASSERT_EQ(Record(n).device_taints.size(), 1u);
  n = ApplyChange(n, PlanRelease(n, "reseated", kNow));
  EXPECT_EQ(Record(n).device_taints.size(), 1u);
  // The operator's next pass (still the same fault) deletes the rule and stops the drain.
  NodeChange next = Plan(Bad(Action::kDrain, {"GPU-3"}, false), n, pol, BrakeAllowAll(), kNow);
  EXPECT_EQ(next.delete_device_taints.size(), 1u);
  EXPECT_TRUE(next.stop_drain);
  EXPECT_TRUE(next.create_device_taints.empty());
  EXPECT_FALSE(next.drain.has_value());
}

// remediation.escalate: one remediation object per occurrence once our drain has finished
// (Done or Blocked), recorded as ours, deleted on recovery, exclusion or release; never in dry
// run, never before the drain ends, never without the field.
api::EscalationTemplate Tmpl() {
  return {"remediation.example.com/v1alpha1", "RebootRemediationTemplate", "ops", "reboot"};
}

PolicyRemediation Escalating(bool escalate = true) {
  PolicyRemediation p = Pol();
  if (escalate) p.remediation.escalate = Tmpl();
  return p;
}

// Fences and starts the drain, then records the drain's outcome as the operator does.
NodeView Drained(const PolicyRemediation& pol, bool done = true) {
  NodeView n = ApplyChange(Node(), Plan(Bad(Action::kDrain), Node(), pol, BrakeAllowAll(), kNow));
  RemediationRecord r = Record(n);
  if (done) {
    MarkDrainCompleted(r, kNow + minutes(1));
  } else {
    MarkDrainBlocked(r, "pod a/b: PDB", kNow + minutes(1));
  }
  n.record_annotation = EncodeRecord(r);
  return n;
}

TEST(PlanEscalate, NothingBeforeTheDrainFinishes) {
  NodeChange first = Plan(Bad(Action::kDrain), Node(), Escalating(), BrakeAllowAll(), kNow);
  EXPECT_FALSE(first.create_escalation);
  NodeView n = ApplyChange(Node(), first);
  NodeChange again =
      Plan(Bad(Action::kDrain), n, Escalating(), BrakeAllowAll(), kNow + seconds(30));
  EXPECT_FALSE(again.create_escalation);
  EXPECT_FALSE(Record(n).escalation);
}

TEST(PlanEscalate, CreatedOnceAfterTheDrainThenDeletedOnRecovery) {
  NodeView n = Drained(Escalating());
  NodeChange c = Plan(Bad(Action::kDrain), n, Escalating(), BrakeAllowAll(), kNow + minutes(2));
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
  EXPECT_TRUE(
      Plan(Bad(Action::kDrain), n, Escalating(), BrakeAllowAll(), kNow + minutes(3)).Empty());
  NodeChange hold = Plan(Healthy(false), n, Escalating(), BrakeAllowAll(), kNow + minutes(4));
  EXPECT_FALSE(hold.create_escalation);
  EXPECT_FALSE(hold.delete_escalation);
  n = ApplyChange(n, hold);
  // Recovery deletes exactly what was created and forgets it.
  NodeChange rec = Plan(Healthy(true), n, Escalating(), BrakeAllowAll(), kNow + minutes(20));
  ASSERT_TRUE(rec.delete_escalation);
  EXPECT_EQ(*rec.delete_escalation, *esc);
  n = ApplyChange(n, rec);
  EXPECT_FALSE(Record(n).escalation);
  EXPECT_FALSE(Record(n).Active());
  EXPECT_TRUE(Plan(Healthy(true), n, Escalating(), BrakeAllowAll(), kNow + minutes(21)).Empty());
}

TEST(PlanEscalate, BlockedDrainEscalatesToo) {
  NodeView n = Drained(Escalating(), /*done=*/false);
  EXPECT_TRUE(Plan(Bad(Action::kDrain), n, Escalating(), BrakeAllowAll(), kNow + minutes(2))
                  .create_escalation);
}

TEST(PlanEscalate, NoFieldOrDryRunCreatesNothing) {
  NodeView n = Drained(Escalating(false));
  EXPECT_FALSE(Plan(Bad(Action::kDrain), n, Escalating(false), BrakeAllowAll(), kNow + minutes(2))
                   .create_escalation);
  PolicyRemediation dry = Escalating();
  dry.dry_run = true;
  NodeView d = ApplyChange(Node(), Plan(Bad(Action::kDrain), Node(), dry, BrakeAllowAll(), kNow));
  EXPECT_FALSE(
      Plan(Bad(Action::kDrain), d, dry, BrakeAllowAll(), kNow + minutes(2)).create_escalation);
}

TEST(PlanEscalate, ExclusionAndReleaseTakeItBack) {
  NodeView n = Drained(Escalating());
  n = ApplyChange(n,
                  Plan(Bad(Action::kDrain), n, Escalating(), BrakeAllowAll(), kNow + minutes(2)));
  ASSERT_TRUE(Record(n).escalation);
  PolicyRemediation excluded = Escalating();
  excluded.governance = Governance::kExcluded;
  EXPECT_TRUE(
      Plan(Bad(Action::kDrain), n, excluded, BrakeAllowAll(), kNow + minutes(3)).delete_escalation);
  // `kubectl gpu-guardian release` cancels the occurrence; the next pass deletes the object
  // and does not create another while the same fault lasts.
  NodeView rel = ApplyChange(n, PlanRelease(n, "reseated", kNow + minutes(3)));
  EXPECT_TRUE(HoldsOurs(rel, Record(rel)));
  NodeChange next =
      Plan(Bad(Action::kDrain), rel, Escalating(), BrakeAllowAll(), kNow + minutes(4));
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
