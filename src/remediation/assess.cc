// Assess() and Plan(NodeInput): the whole decision for one node from what the caches hold —
// exclusion, Evaluate per selecting policy, Resolve, a finished drain's outcome, then the
// change (plan.cc).
#include <utility>

#include "remediation/plan.h"

namespace gg::remediation {

bool ExcludedByLabel(std::optional<std::string_view> value) { return value == "true"; }

namespace {

bool Fenced(const std::optional<RemediationRecord>& record, const std::string& uuid) {
  if (!record) return false;
  for (const auto& d : record->device_taints) {
    if (d.gpu_uuid == uuid) return true;
  }
  return false;
}

// What judges a fenced node no valid policy selects: the built-in level rules (GPU lost or
// missing, ECC, remapped rows, ...: the GPUs' state now; Xid rules are left out, their windows
// are history the deleted policy chose) and the recovery settings recorded when it was fenced.
// It starts nothing: Unknown does nothing and an Unhealthy verdict only holds.
std::shared_ptr<const api::GpuHealthPolicy> UngovernedPolicy(
    const std::optional<RemediationRecord>& rec) {
  auto p = std::make_shared<api::GpuHealthPolicy>();
  p->name = rec && !rec->policy.empty() ? rec->policy : "none";
  p->spec = api::DefaultPolicySpec();
  std::erase_if(p->spec.rules, [](const api::Rule& r) { return r.xid.has_value(); });
  p->spec.unknown.action = api::Action::kNone;
  if (rec) {
    p->spec.recovery.healthy_for = rec->healthy_for.value_or(p->spec.recovery.healthy_for);
    p->spec.recovery.automatic = rec->automatic_recovery;
  }
  return p;
}

// Evaluates the report under UngovernedPolicy, continuing the fencing policy's memory (a node
// without one is taken as unhealthy until now, so healthyFor counts from here).
void AssessUngoverned(const NodeInput& in, Assessment& a, WallTime now) {
  a.ungoverned = true;
  a.ungoverned_policy = UngovernedPolicy(a.record);
  a.policy = a.ungoverned_policy.get();
  policy::EvalMemory prior;
  if (a.record) {
    if (auto it = a.record->memory.find(a.policy->name); it != a.record->memory.end()) {
      prior = it->second;
    }
  }
  if (prior.empty()) {
    prior.state = policy::HealthState::kUnhealthy;
    prior.since = now;
  }
  policy::Verdict v = policy::EvaluateReport(*a.policy, in.report, prior, now);
  v.action = api::Action::kNone;  // holds or releases; never fences anew
  a.memories[a.policy->name] = v.memory;
  a.verdict = std::move(v);
}

}  // namespace

std::vector<std::string> Assessment::GpusToFence() const {
  std::vector<std::string> out;
  for (const auto& u : fence_units) {
    if (!u.optional && !Fenced(record, u.uuid)) out.push_back(u.uuid);
  }
  return out;
}

std::vector<FenceUnit> Assessment::UnfencedUnits() const {
  std::vector<FenceUnit> out;
  for (const auto& u : fence_units) {
    if (!Fenced(record, u.uuid)) out.push_back(u);
  }
  return out;
}

std::vector<std::string> Assessment::DevicesToMap() const {
  std::vector<std::string> out;
  for (const auto& u : UnfencedUnits()) out.push_back(u.uuid);
  return out;
}

Assessment Assess(const NodeInput& in, WallTime now) {
  Assessment a;
  if (in.node.record_annotation) {
    auto r = DecodeRecord(*in.node.record_annotation);
    if (r.ok()) a.record = std::move(r).value();
  }
  const bool ours = HoldsOurs(in.node, a.record);
  // Opted out: no decisions; what is ours is released at once (a running drain stops).
  if (in.exclude_label && ExcludedByLabel(std::string_view(*in.exclude_label))) {
    a.excluded = true;
    if (ours) {
      a.ungoverned_policy = UngovernedPolicy(a.record);
      a.policy = a.ungoverned_policy.get();
      a.verdict = policy::Verdict{};
      a.verdict->policy = a.policy->name;
      a.verdict->reason = "Excluded";
    }
    return a;
  }
  if (in.policies.empty()) {
    if (ours) AssessUngoverned(in, a, now);
    return a;
  }
  std::vector<policy::Verdict> verdicts;
  verdicts.reserve(in.policies.size());
  for (const auto* p : in.policies) {
    policy::EvalMemory prior;
    if (a.record) {
      if (auto it = a.record->memory.find(p->name); it != a.record->memory.end()) {
        prior = it->second;
      }
    }
    policy::Verdict v = policy::EvaluateReport(*p, in.report, prior, now, in.node_conditions);
    a.memories[p->name] = v.memory;
    a.states[p->name] = v.state;
    verdicts.push_back(std::move(v));
  }
  a.verdict = policy::Resolve(verdicts);
  if (!a.verdict) return a;
  a.policy = in.policies.front();
  for (const auto* p : in.policies) {
    if (p->name == a.verdict->policy) a.policy = p;
  }
  if (in.report.ok()) a.fence_units = FenceUnitsFor(*a.verdict, *in.report);
  return a;
}

NodeChange Plan(const NodeInput& in, const Assessment& a, const Lookups& lookups, WallTime now) {
  if (a.excluded && !a.verdict) {
    NodeChange out;
    out.excluded = true;
    out.stop_drain = true;
    return out;
  }
  if (!a.verdict || a.policy == nullptr) return NodeChange{};
  const bool draining = a.record && a.record->drain.phase == DrainPhase::kRunning;
  NodeView view = in.node;
  view.dra_devices = lookups.dra_devices;
  view.driver_taints = a.driver_taints;
  if (lookups.fence_units) {
    view.fence_units = *lookups.fence_units;
  } else {
    for (const auto& u : a.fence_units) {
      if (!u.optional) view.fence_units.push_back(u);
    }
  }
  // A finished drain's outcome goes into the record before planning.
  std::optional<RemediationRecord> folded;
  PlannedEvent drain_event;
  if (draining && in.drain) {
    folded = *a.record;
    const std::string& node = in.node.name;
    drain_event.reason = in.drain->done ? MarkDrainCompleted(*folded, now)
                                        : MarkDrainBlocked(*folded, in.drain->message, now);
    drain_event.type = events::TypeOfReason(drain_event.reason);
    drain_event.message = in.drain->done
                              ? "drained node " + node + ": " + in.drain->message
                              : "drain of node " + node + " blocked: " + folded->drain.message;
    view.record_annotation = EncodeRecord(*folded);
  }
  PolicyRemediation pol = RemediationFor(*a.policy);
  if (a.excluded) pol.governance = Governance::kExcluded;
  if (a.ungoverned) pol.governance = Governance::kUngoverned;
  NodeChange out = Plan(*a.verdict, view, pol, lookups.brake, now, &a.memories);
  out.forget_drain = !draining;
  if (a.excluded) {
    out.excluded = true;
    out.stop_drain = true;
  }
  if (folded) {
    if (!out.record) out.record = std::move(folded);
    out.events.push_back(std::move(drain_event));
    out.drain_recorded = in.drain->state;
  }
  return out;
}

}  // namespace gg::remediation
