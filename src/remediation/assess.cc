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
  // Opted out: no decisions, no writes (a running drain of ours stops).
  if (in.exclude_label && ExcludedByLabel(std::string_view(*in.exclude_label))) {
    a.excluded = true;
    return a;
  }
  if (in.policies.empty()) return a;
  if (in.node.record_annotation) {
    auto r = DecodeRecord(*in.node.record_annotation);
    if (r.ok()) a.record = std::move(r).value();
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
    policy::Verdict v = policy::EvaluateReport(*p, in.report, prior, now);
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
  if (a.excluded) {
    NodeChange out;
    out.excluded = true;
    out.stop_drain = true;
    return out;
  }
  if (!a.verdict || a.policy == nullptr) return NodeChange{};
  const bool draining = a.record && a.record->drain.phase == DrainPhase::kRunning;
  NodeView view = in.node;
  view.dra_devices = lookups.dra_devices;
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
  NodeChange out =
      Plan(*a.verdict, view, RemediationFor(*a.policy), lookups.brake, now, &a.memories);
  out.forget_drain = !draining;
  if (folded) {
    if (!out.record) out.record = std::move(folded);
    out.events.push_back(std::move(drain_event));
    out.drain_recorded = in.drain->state;
  }
  return out;
}

}  // namespace gg::remediation
