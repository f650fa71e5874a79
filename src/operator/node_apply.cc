// NodeReconciler's apply layer: turns one remediation::NodeChange into writes through the
// injected interfaces (DraApi, NodeWriter, EventRecorder, DrainStarter) and the fleet index,
// and logs each action taken or skipped once, with node, policy, rule and reason.
#include <algorithm>
#include <set>

#include "common/strings.h"
#include "common/time_util.h"
#include "events/aggregating.h"
#include "operator/node_reconciler.h"

namespace gg::op {
namespace {

using remediation::NodeChange;

// Events that announce an action the apply layer logs itself (no second line for them).
bool AnnouncesLoggedAction(std::string_view reason) {
  return reason == events::kNodeTainted || reason == events::kNodeCordoned ||
         reason == events::kNodeUncordoned || reason == events::kNodeDrained ||
         reason == events::kDrainBlocked;
}

std::string_view LogMessageFor(std::string_view reason) {
  if (reason == events::kGPUUnhealthy) return "GPU fault: remediation occurrence started";
  if (reason == events::kGPURecovered) return "node recovered";
  if (reason == events::kGPUTelemetryLost) return "GPU telemetry lost: node state Unknown";
  if (reason == events::kRemediationSkipped) return "remediation skipped";
  return "event";
}

// Our taint into the node's full taint list (it is sent whole: other owners' taints unchanged).
std::vector<k8s::Taint> NewTaints(const k8s::Node& node, const NodeChange& c, WallTime now) {
  std::vector<k8s::Taint> taints = node.taints;
  if (c.remove_taint) {
    std::erase_if(taints, [](const k8s::Taint& t) { return t.key == api::kTaintKey; });
  }
  if (c.set_taint) {
    k8s::Taint t{c.set_taint->key, c.set_taint->value, c.set_taint->effect, now};
    auto it = std::find_if(taints.begin(), taints.end(),
                           [&](const k8s::Taint& x) { return x.key == t.key; });
    if (it == taints.end()) {
      taints.push_back(t);
    } else {
      if (it->time_added) t.time_added = it->time_added;
      *it = t;
    }
  }
  return taints;
}

}  // namespace

StatusOr<runtime::Result> NodeReconciler::Apply(Pass& pass, NodeChange& change,
                                                std::unique_lock<std::mutex>& brake_lock) {
  if (!pass.assessment.verdict) return ApplyNotSelected(pass.node.meta.name, change);
  if (Status s = ApplyDeviceTaints(pass, change); !s.ok()) return s;
  if (Status s = ApplyEscalation(pass, change); !s.ok()) return s;
  MarkClaims(pass, change);
  if (Status s = WriteNode(pass, change); !s.ok()) return s;
  brake_lock = {};  // the index now reflects what we started
  // The node write committed the record whose transitions these Events announce: the next pass
  // reads that record and will not decide them again, so they go out now, even when the
  // condition write below fails. With no node write, the next pass decides them again. Events
  // that follow an accepted write are admitted even if the lease ran out during its round trip.
  const bool wrote_node = change.WritesNode();
  if (wrote_node) EmitEvents(pass, change, /*after_write=*/true);
  if (Status s = WriteCondition(pass, change); !s.ok()) return s;
  if (!wrote_node) EmitEvents(pass, change, /*after_write=*/change.condition.has_value());
  auto result = RunDrain(pass, change);
  if (!result.ok()) return result.status();
  return Finish(pass, change, *result);
}

// Excluded, or no valid policy selects the node, and nothing of ours on it: nothing decided,
// nothing written.
runtime::Result NodeReconciler::ApplyNotSelected(const std::string& node,
                                                 const NodeChange& change) {
  if (change.stop_drain) d_.drains.Cancel(node);
  if (change.excluded) d_.index.SetExcluded(node, true);
  for (const auto& p : d_.index.SetVerdicts(node, {}, "")) d_.enqueue_policy(p);
  d_.metrics.ForgetNode(node);
  return runtime::Result{};
}

Status NodeReconciler::ApplyDeviceTaints(Pass& pass, NodeChange& change) {
  const std::string& name = pass.node.meta.name;
  for (const auto& dt : change.delete_device_taints) {
    if (dt.rule_name.empty() || d_.dra == nullptr) continue;  // never created
    bool skipped = false;
    Status s = d_.dra->DeleteOurRule(dt.rule_name, &skipped);
    if (!s.ok()) {
      d_.metrics.Remediation("device_untaint", kResultFailure);
      return s;
    }
    d_.metrics.Remediation("device_untaint", skipped ? kResultSkipped : kResultSuccess);
    Log(pass).Info(skipped ? "device taint skipped: DeviceTaintRule not ours, left alone"
                           : "device taint removed",
                   {{"gpu", dt.gpu_uuid}, {"deviceTaintRule", dt.rule_name}});
  }
  for (const auto& dt : change.create_device_taints) {
    auto it = pass.devices.by_uuid.find(dt.gpu_uuid);
    if (d_.dra == nullptr || it == pass.devices.by_uuid.end()) {
      return FailedPreconditionError("GPU " + dt.gpu_uuid + " of node " + name +
                                     " has no DRA device to taint");
    }
    remediation::DeviceTaintRuleSpec rs{name,
                                        dt.gpu_uuid,
                                        it->second,
                                        dt.reason,
                                        dt.effect,
                                        dt.message,
                                        pass.assessment.policy->name};
    bool created = false;
    auto rule = d_.dra->EnsureRule(rs, &created);
    if (!rule.ok()) {
      d_.metrics.Remediation("device_taint", kResultFailure);
      return rule.status();
    }
    if (change.record) {
      for (auto& r : change.record->device_taints) {
        if (r.gpu_uuid != dt.gpu_uuid) continue;
        r.rule_name = *rule;
        r.device = it->second.ToString();
      }
    }
    // A retried pass finds its own rule: counted and logged once, when it was created.
    if (created) {
      d_.metrics.Remediation("device_taint", kResultSuccess);
      Log(pass).Info("device taint created",
                     {{"gpu", dt.gpu_uuid}, {"deviceTaintRule", *rule}, {"effect", dt.effect}});
    }
  }
  return OkStatus();
}

Status NodeReconciler::ApplyEscalation(Pass& pass, NodeChange& change) {
  if (!change.create_escalation && !change.delete_escalation) return OkStatus();
  if (d_.escalation == nullptr) {
    return FailedPreconditionError("remediation.escalate: this operator has no escalation client");
  }
  if (const auto& del = change.delete_escalation) {
    Status s = d_.escalation->Delete(*del);
    d_.metrics.Remediation("unescalate", s.ok() ? kResultSuccess : kResultFailure);
    if (!s.ok()) return s;  // retried before the record forgets the object
    Log(pass).Info("remediation object deleted",
                   {{"action", "unescalate"},
                    {"object", del->kind + " " + del->namespace_ + "/" + del->name}});
  }
  if (const auto& tmpl = change.create_escalation) {
    const std::string occurrence = change.record ? change.record->occurrence : "";
    EscalationOwner owner{pass.node.meta.name, occurrence,
                          pass.assessment.policy ? pass.assessment.policy->name : ""};
    Status s = d_.escalation->Create(*tmpl, owner);
    d_.metrics.Remediation("escalate", s.ok() ? kResultSuccess : kResultFailure);
    if (!s.ok()) {
      NotEscalated(pass, change, s);
      return OkStatus();
    }
    Log(pass).Info("remediation object created",
                   {{"action", "escalate"},
                    {"object", tmpl->RemediationKind() + " " + tmpl->namespace_ + "/" + owner.node},
                    {"template", tmpl->kind + " " + tmpl->namespace_ + "/" + tmpl->name}});
  }
  return OkStatus();
}

// The hand-off failed (template missing or without spec.template.spec, RBAC not granted): the
// rest of the pass (the drain's outcome, the condition) is still written, the record does not
// claim the object, and the node is looked at again soon to retry.
void NodeReconciler::NotEscalated(Pass& pass, NodeChange& change, const Status& why) {
  Log(pass).Error("remediation object not created (retried)", {{"error", why.ToString()}});
  if (change.record) change.record->escalation.reset();
  std::erase_if(change.events, [](const remediation::PlannedEvent& e) {
    return e.reason == events::kRemediationEscalated;
  });
  const WallTime retry = pass.now + kEscalationRetry;
  if (!change.requeue_at || *change.requeue_at > retry) change.requeue_at = retry;
}

// KEP-4817 (remediation.claimStatus): the claims holding a device fenced or released in this
// pass get our GPUHealthy condition set or taken off. Best effort: a failure (the optional
// claim-status RBAC left out, a claim API that does not serve status.devices) is logged and
// counted and never holds back the fence itself.
// remediation.claimStatus: our condition on the claims holding a device fenced in this pass
// (by our rule, or by the driver's taint counted as a fence), and off again for the devices
// released — also on the claims marked at the fence whose pods are gone since (drained): the
// record keeps them per device.
void NodeReconciler::MarkClaims(Pass& pass, NodeChange& change) {
  const auto* policy = pass.assessment.policy;
  if (d_.dra == nullptr || policy == nullptr || !policy->spec.remediation.claim_status) return;
  static const std::vector<remediation::DeviceTaintRecord> kNone;
  const auto& old = pass.assessment.record ? pass.assessment.record->device_taints : kNone;
  auto add = [](const std::string& device, std::vector<remediation::DeviceRef>& out) {
    if (auto ref = remediation::ParseDeviceRef(device); ref.ok()) out.push_back(*ref);
  };
  std::vector<remediation::DeviceRef> fenced, released;
  std::vector<remediation::DeviceTaintRecord*> fresh;  // entries new in this pass
  if (change.record) {
    for (auto& r : change.record->device_taints) {
      bool known = std::any_of(old.begin(), old.end(),
                               [&](const auto& o) { return o.gpu_uuid == r.gpu_uuid; });
      if (known) continue;
      add(r.device, fenced);
      fresh.push_back(&r);
    }
  }
  std::vector<std::string> also;
  for (const auto& dt : change.delete_device_taints) {
    for (const auto& r : old) {
      if (r.gpu_uuid != dt.gpu_uuid || (r.rule_name.empty() && r.driver_taint.empty())) continue;
      add(r.device, released);
      also.insert(also.end(), r.claims.begin(), r.claims.end());
    }
  }
  const std::string message =
      change.create_device_taints.empty()
          ? (pass.assessment.verdict ? pass.assessment.verdict->message : "")
          : change.create_device_taints[0].message;
  for (bool healthy : {false, true}) {
    const auto& refs = healthy ? released : fenced;
    if (refs.empty()) continue;
    auto n = d_.dra->MarkClaims(
        pass.node.meta.name, refs,
        {healthy, "gpu-guardian fenced this device: " + message, FormatRfc3339(pass.now)},
        healthy ? also : std::vector<std::string>{});
    d_.metrics.Remediation(healthy ? "claim_status_clear" : "claim_status",
                           n.ok() ? kResultSuccess : kResultFailure);
    if (!n.ok()) {
      Log(pass).Error("ResourceClaim status not written", {{"error", n.status().ToString()}});
      continue;
    }
    if (n->empty()) continue;
    Log(pass).Info(healthy ? "claim condition removed" : "claim condition set",
                   {{"claims", std::to_string(n->size())}});
    if (healthy) continue;
    // Kept per device (a claim that does not hold it is simply left alone at recovery).
    constexpr size_t kMaxClaims = 16;
    for (auto* r : fresh)
      r->claims.assign(n->begin(), n->begin() + std::min(n->size(), kMaxClaims));
  }
}

Status NodeReconciler::WriteNode(Pass& pass, const NodeChange& change) {
  if (!change.WritesNode()) return OkStatus();
  const std::string& name = pass.node.meta.name;
  NodeSpecChange patch;
  patch.resource_version = pass.node.meta.resource_version;
  std::vector<std::pair<std::string_view, std::string>> actions;  // metric action, log line
  if (change.set_taint || change.remove_taint) {
    patch.taints = NewTaints(pass.node, change, pass.now);
    if (change.set_taint) {
      actions.emplace_back("taint", "node tainted " + change.set_taint->key + "=" +
                                        change.set_taint->value + ":" + change.set_taint->effect);
    } else {
      actions.emplace_back("untaint", "node untainted " + std::string(api::kTaintKey));
    }
  }
  if (change.unschedulable) {
    patch.unschedulable = *change.unschedulable;
    actions.emplace_back(*change.unschedulable ? "cordon" : "uncordon",
                         *change.unschedulable ? "node cordoned" : "node uncordoned");
  }
  if (change.record) {
    patch.annotations[api::kRemediationAnnotation] = remediation::EncodeRecord(*change.record);
  }
  auto rv = d_.writer.PatchNode(name, patch);
  if (!rv.ok()) {
    for (const auto& a : actions) d_.metrics.Remediation(a.first, kResultFailure);
    return rv.status();
  }
  NoteOwnWrite(name, *rv);
  if (change.record) d_.index.ApplyOwnRecord(name, *change.record);
  for (const auto& a : actions) {
    d_.metrics.Remediation(a.first, kResultSuccess);
    Log(pass).Info(a.second, {{"action", a.first}});
  }
  if (change.starts_node_fence && pass.in.report.ok()) {
    double secs =
        std::chrono::duration<double>(d_.clock.Now() - pass.in.report->observed_at).count();
    if (secs >= 0) d_.metrics.detection_to_action.WithLabels({}).Observe(secs);
  }
  return OkStatus();
}

Status NodeReconciler::WriteCondition(Pass& pass, const NodeChange& change) {
  if (!change.condition) return OkStatus();
  const std::string& name = pass.node.meta.name;
  k8s::NodeCondition c;
  c.type = api::kConditionType;
  c.status = change.condition->status;
  c.reason = change.condition->reason;
  c.message = change.condition->message;
  const auto* cur = pass.node.FindCondition(api::kConditionType);
  c.last_transition_time = (cur && cur->status == c.status && cur->last_transition_time)
                               ? cur->last_transition_time
                               : std::optional<WallTime>(pass.now);
  c.last_heartbeat_time = pass.now;
  auto rv = d_.writer.PatchCondition(name, c);
  if (!rv.ok()) return rv.status();
  NoteOwnWrite(name, *rv);
  // Only when the condition was the pass's one write: after a fence, the echo must still
  // bring the node back (a drain to start, our record to read).
  if (!change.WritesNode() && change.events.empty()) NoteConditionEcho(name, *rv);
  return OkStatus();
}

void NodeReconciler::EmitEvents(Pass& pass, const NodeChange& change, bool after_write) {
  const events::AdmittedByWrite admitted(after_write);
  auto ref = events::ObjectRef::Node(pass.node.meta.name, pass.node.meta.uid);
  for (const auto& e : change.events) {
    d_.recorder.Event(ref, e.type, e.reason, e.message);
    if (!AnnouncesLoggedAction(e.reason)) {
      Log(pass).Info(LogMessageFor(e.reason), {{"event", e.reason}, {"detail", e.message}});
    }
  }
  if (!change.drain_recorded.empty()) {
    const bool done = change.drain_recorded == "Done";
    const bool timed_out = pass.in.drain && pass.in.drain->timed_out;
    Log(pass).Info(done        ? "drain finished"
                   : timed_out ? "drain timed out"
                               : "drain blocked",
                   {{"action", "drain"}, {"detail", pass.in.drain ? pass.in.drain->message : ""}});
    d_.metrics.drains.WithLabels({change.drain_recorded}).Inc();
  }
}

StatusOr<runtime::Result> NodeReconciler::RunDrain(Pass& pass, const NodeChange& change) {
  const std::string& name = pass.node.meta.name;
  runtime::Result result;
  if (change.stop_drain) {
    if (d_.drains.Running(name)) Log(pass).Info("drain stopped", {{"action", "drain"}});
    d_.drains.Cancel(name);
  }
  if (change.forget_drain) d_.drains.Forget(name);
  if (!change.drain) return result;
  remediation::DrainJob spec(change.drain->spec);
  if (!change.drain->gpu_uuids.empty() && !d_.drains.Running(name)) {
    // Device-level: evict only the pods holding a fenced GPU (their claims' allocations).
    // No new pod can be allocated a tainted GPU, so the set taken at the start is complete.
    const std::vector<remediation::DeviceTaintRecord> none;
    const auto& taints = change.record            ? change.record->device_taints
                         : pass.assessment.record ? pass.assessment.record->device_taints
                                                  : none;
    std::vector<remediation::DeviceRef> refs;
    for (const auto& dt : taints) {
      auto ref = remediation::ParseDeviceRef(dt.device);
      if (ref.ok()) refs.push_back(*ref);
    }
    std::set<std::string> holders;
    if (d_.dra && !refs.empty()) {
      auto pods = d_.dra->PodsHolding(name, refs);
      if (!pods.ok()) return pods.status();
      holders = std::move(*pods);
    }
    spec.pod_uids = std::move(holders);
  }
  if (change.starts_drain) d_.metrics.Remediation("drain", kResultSuccess);
  auto started = d_.drains.Ensure(name, spec, change.drain->deadline);
  if (started == DrainStarter::Start::kStarted) {
    Log(pass).Info("drain started", {{"action", "drain"},
                                     {"scope", api::DrainScopeName(spec.scope)},
                                     {"pods", spec.pod_uids ? std::to_string(spec.pod_uids->size())
                                                            : "all in scope"}});
  }
  if (started == DrainStarter::Start::kNoCapacity) result.requeue_after = std::chrono::seconds(5);
  return result;
}

runtime::Result NodeReconciler::Finish(Pass& pass, const NodeChange& change,
                                       runtime::Result result) {
  const std::string& name = pass.node.meta.name;
  const remediation::Assessment& a = pass.assessment;
  if (change.brake_blocked) {
    d_.metrics.Remediation(Lower(api::ActionName(a.verdict->action)), kResultBraked);
    result.requeue_after = kBrakeRecheck;
    const auto& retry_at = pass.lookups.brake.retry_at;
    if (retry_at && *retry_at > pass.now) {
      result.requeue_after = std::min<Duration>(kBrakeRecheck, *retry_at - pass.now);
    }
  }
  if (a.excluded || a.ungoverned) {
    // No policy decides for the node: it counts under none (our release is in the index).
    if (a.excluded) d_.index.SetExcluded(name, true);
    for (const auto& p : d_.index.SetVerdicts(name, {}, "")) d_.enqueue_policy(p);
    d_.metrics.ForgetNode(name);
  } else {
    for (const auto& p : d_.index.SetVerdicts(
             name, a.states, change.brake_blocked ? a.policy->name : std::string())) {
      d_.enqueue_policy(p);
    }
    d_.metrics.SetNodeHealth(name, policy::HealthStateName(a.verdict->state));
  }
  if (change.requeue_at) {
    Duration after =
        std::max<Duration>(*change.requeue_at - pass.now, std::chrono::milliseconds(100));
    if (result.requeue_after.count() == 0 || after < result.requeue_after)
      result.requeue_after = after;
  }
  return result;
}

}  // namespace gg::op
