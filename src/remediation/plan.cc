// Plan(): verdict + node state + record -> the changes to make (see plan.h, docs/policy.md).
#include "remediation/plan.h"

#include <algorithm>

#include "api/gpu_node_health.h"
#include "common/time_util.h"

namespace gg::remediation {
namespace {

using api::Action;
using policy::HealthState;

template <typename T>
bool Contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string ConditionStatus(HealthState s) {
  switch (s) {
    case HealthState::kHealthy: return "True";
    case HealthState::kUnhealthy: return "False";
    case HealthState::kUnknown: return "Unknown";
  }
  return "Unknown";
}

std::string DeviceEffect(api::DeviceTaintEffect e) {
  // NoExecute only when the policy asks for it (kube-controller-manager then deletes the pods
  // using the device, bypassing PodDisruptionBudgets).
  return std::string(api::DeviceTaintEffectName(e));
}

class Planner {
 public:
  Planner(const policy::Verdict& v, const NodeView& node, const PolicyRemediation& pol,
          const BrakeDecision& brake, WallTime now)
      : v_(v), node_(node), pol_(pol), brake_(brake), now_(now) {}

  RemediationPlan Run(const std::map<std::string, policy::EvalMemory>* memories);

 private:
  void Event(const std::string& type, const std::string& reason, std::string message) {
    if (pol_.dry_run) message = "dry run: " + message;
    Step s;
    s.kind = StepKind::kEmitEvent;
    s.event = {type, reason, std::move(message)};
    events_.push_back(std::move(s));
  }
  void NodeStep(Step s) {
    if (!pol_.dry_run) node_steps_.push_back(std::move(s));
  }
  // Taint value for a GPU's DeviceTaintRule: the first rule that fired for it.
  std::string DeviceReason(const std::string& uuid) const {
    for (const auto& e : v_.evidence) {
      if (e.gpu_uuid == uuid && e.action > Action::kEvent) return e.rule;
    }
    for (const auto& e : v_.evidence) {
      if (e.gpu_uuid == uuid) return e.rule;
    }
    return "unhealthy";
  }
  const NodeTaint* OurTaint() const {
    for (const auto& t : node_.taints) {
      if (t.key == api::kTaintKey) return &t;
    }
    return nullptr;
  }
  bool NodeFenced() const {
    return rec_.tainted || rec_.cordoned || !rec_.device_taints.empty() ||
           rec_.drain.phase == DrainPhase::kRunning || (rec_.dry_run && rec_.action >= Action::kTaint);
  }
  void Release(const std::string& why);
  void StartOccurrence();
  void Apply(Action target);

  const policy::Verdict& v_;
  const NodeView& node_;
  const PolicyRemediation& pol_;
  const BrakeDecision& brake_;
  WallTime now_;
  RemediationRecord rec_;
  RemediationPlan plan_;
  std::vector<Step> node_steps_;
  std::vector<Step> events_;
};

// Undo every change that is ours (never anything else) and forget the ownership.
void Planner::Release(const std::string& why) {
  std::vector<std::string> undone;
  if (rec_.tainted) {
    if (OurTaint()) {
      Step s;
      s.kind = StepKind::kRemoveTaint;
      s.taint.key = api::kTaintKey;
      NodeStep(s);
      undone.push_back("taint removed");
    }
    rec_.tainted = false;
    rec_.taint_effect.clear();
  }
  if (rec_.cordoned) {
    if (node_.unschedulable) {
      Step s;
      s.kind = StepKind::kUncordon;
      NodeStep(s);
      Event("Normal", kReasonNodeUncordoned, "Node uncordoned: " + why);
      undone.push_back("uncordoned");
    }
    rec_.cordoned = false;
  }
  for (const auto& d : rec_.device_taints) {
    Step s;
    s.kind = StepKind::kRemoveDeviceTaint;
    s.gpu_uuid = d.gpu_uuid;
    NodeStep(s);
    undone.push_back("device taint on " + d.gpu_uuid + " removed");
  }
  rec_.device_taints.clear();
  if (rec_.drain.phase == DrainPhase::kRunning) {
    if (!pol_.dry_run) plan_.stop_drain = true;
    rec_.drain.phase = DrainPhase::kCancelled;
    rec_.drain.finished_at = now_;
  }
  if (!undone.empty()) plan_.ends_node_fence = true;
}

void Planner::StartOccurrence() {
  rec_.occurrence = node_.name + "-" +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                       now_.time_since_epoch())
                                       .count());
  rec_.started_at = now_;
  rec_.cancelled = false;
  rec_.cancelled_at.reset();
  rec_.action = Action::kNone;
  rec_.drain = DrainRecord{};
  rec_.skipped.clear();
  rec_.dry_run = pol_.dry_run;
  if (v_.state == HealthState::kUnknown) {
    // GPUTelemetryLost is announced by the state transition below.
  } else {
    Event("Warning", kReasonGpuUnhealthy, v_.message);
  }
}

void Planner::Apply(Action target) {
  // Device level while the failure is confined to GPUs (or, when holding on a Healthy/Unknown
  // verdict, while this occurrence is fenced at device level only). Once the node itself is
  // fenced, the occurrence stays node-level.
  bool confined = v_.state == HealthState::kUnhealthy && !v_.node_wide && !v_.bad_gpus.empty();
  bool holding_devices = v_.state != HealthState::kUnhealthy && !rec_.device_taints.empty();
  bool device_level = pol_.remediation.device_level == api::DeviceLevelMode::kAuto &&
                      node_.dra_devices && !rec_.tainted && !rec_.cordoned &&
                      (confined || holding_devices);
  Action old = rec_.action;

  // Brake: starting to fence a node (or a GPU) that is not fenced yet is new remediation.
  if (target >= Action::kTaint && !NodeFenced()) {
    bool ok = brake_.allow_new_node && (!device_level || brake_.allow_new_device);
    if (!ok) {
      plan_.brake_blocked = true;
      target = std::max(old, Action::kEvent);
      std::string why = "Remediation held back by the brake: " + brake_.reason;
      if (rec_.skipped != why) {
        rec_.skipped = why;
        Event("Warning", kReasonRemediationSkipped, why);
      }
    } else {
      plan_.starts_node_fence = !pol_.dry_run;
      rec_.skipped.clear();
    }
  }
  bool want_drain = target >= Action::kDrain;
  if (want_drain && rec_.drain.phase == DrainPhase::kNone && !(pol_.dry_run && old >= Action::kDrain)) {
    if (!brake_.allow_new_drain) {
      plan_.brake_blocked = true;
      want_drain = false;
      target = std::max(old, Action::kCordon);
      std::string why = "Drain held back by the brake: " + brake_.reason;
      if (rec_.skipped != why) {
        rec_.skipped = why;
        Event("Warning", kReasonRemediationSkipped, why);
      }
    }
  }

  if (pol_.dry_run) {
    // Decide and record, change nothing: one Event per step up the ladder.
    if (target > old && target >= Action::kTaint) {
      Event("Normal", kReasonRemediationSkipped,
            "would " + std::string(api::ActionName(target)) + " node " +
                (device_level ? "(device-level, GPUs " : "(node-level, ") +
                std::to_string(v_.bad_gpus.size()) + " bad GPU(s)): " + v_.message);
    }
    rec_.action = std::max(old, target);
    return;
  }

  const std::string effect = DeviceEffect(pol_.remediation.device_taint_effect);
  if (device_level && target >= Action::kTaint) {
    // The device budget counts every GPU, also the second GPU of a node already fenced.
    std::optional<int64_t> left = brake_.devices_left;
    bool held = false;
    for (const auto& uuid : v_.bad_gpus) {
      bool have = false;
      for (const auto& d : rec_.device_taints) have = have || d.gpu_uuid == uuid;
      if (have) continue;
      if (left && *left <= 0) {
        plan_.brake_blocked = held = true;
        std::string why = "Device-level remediation of GPU " + uuid + " held back by the brake: " +
                          (brake_.reason.empty() ? "maxDevicesPerHour reached" : brake_.reason);
        if (rec_.skipped != why) {
          rec_.skipped = why;
          Event("Warning", kReasonRemediationSkipped, why);
        }
        continue;
      }
      if (left) --*left;
      Step s;
      s.kind = StepKind::kAddDeviceTaint;
      s.gpu_uuid = uuid;
      s.effect = effect;
      s.reason = DeviceReason(uuid);
      s.message = v_.message;
      NodeStep(s);
      DeviceTaintRecord rec;
      rec.gpu_uuid = uuid;
      rec.effect = effect;
      rec.since = now_;
      rec_.device_taints.push_back(std::move(rec));
      ++plan_.device_fences_started;
      Event("Normal", kReasonNodeTainted,
            "GPU " + uuid + " tainted " + api::kTaintKey + "=" + s.reason + ":" + effect +
                " (device-level DeviceTaintRule; the node stays schedulable)");
    }
    if (!held && rec_.skipped.starts_with("Device-level")) rec_.skipped.clear();
  }
  bool want_taint = target >= Action::kTaint && !device_level;
  bool want_cordon = target >= Action::kCordon && !device_level;
  // Effect None only announces: nothing is fenced, so nothing is evicted either.
  if (device_level && effect == "None") want_drain = false;

  if (want_cordon && !rec_.cordoned && !node_.unschedulable) {
    Step s;
    s.kind = StepKind::kCordon;
    NodeStep(s);
    rec_.cordoned = true;
    Event("Normal", kReasonNodeCordoned, "Node cordoned: " + v_.message);
  }
  // (node already unschedulable and not ours: an admin's cordon, left alone and not owned)

  if (want_taint) {
    NodeTaint desired{api::kTaintKey, rec_.cordoned ? kTaintValueCordoned : kTaintValueTainted,
                      std::string(api::TaintEffectName(pol_.remediation.taint_effect))};
    const NodeTaint* cur = OurTaint();
    if (!cur || !(*cur == desired)) {
      Step s;
      s.kind = StepKind::kAddTaint;
      s.taint = desired;
      NodeStep(s);
      if (!cur) Event("Normal", kReasonNodeTainted, "Node tainted " + desired.key + ":" + desired.effect);
    }
    rec_.tainted = true;
    rec_.taint_effect = desired.effect;
  }

  if (want_drain) {
    DrainRequest req;
    req.spec = pol_.remediation.drain;
    if (device_level) {
      for (const auto& d : rec_.device_taints) req.gpu_uuids.push_back(d.gpu_uuid);
    }
    if (rec_.drain.phase == DrainPhase::kNone) {
      rec_.drain.phase = DrainPhase::kRunning;
      rec_.drain.started_at = now_;
      req.start = true;
      plan_.starts_drain = true;
    }
    if (rec_.drain.phase == DrainPhase::kRunning) {
      req.deadline = rec_.drain.started_at.value_or(now_) + pol_.remediation.drain.timeout;
      plan_.drain = req;
    }
  }
  rec_.action = std::max(old, target);
}

RemediationPlan Planner::Run(const std::map<std::string, policy::EvalMemory>* memories) {
  plan_.requeue_at = v_.next_evaluation;
  if (pol_.paused) return plan_;
  auto ex = node_.labels.find(api::kExcludeLabel);
  bool excluded = ex != node_.labels.end() && ex->second == "true";

  // The GPUHealthy condition always reflects the verdict (except in dry run: no changes).
  std::string cond_msg = v_.message + " [policy " + v_.policy + "]";
  if (excluded) cond_msg += " (remediation disabled by label " + std::string(api::kExcludeLabel) + ")";
  NodeConditionView want{ConditionStatus(v_.state), v_.reason, cond_msg};
  if (!pol_.dry_run && (!node_.gpu_condition || !(*node_.gpu_condition == want))) {
    Step s;
    s.kind = StepKind::kSetCondition;
    s.status = want.status;
    s.reason = want.reason;
    s.message = want.message;
    node_steps_.push_back(s);
  }
  if (excluded) {
    plan_.steps = std::move(node_steps_);
    return plan_;
  }

  std::optional<RemediationRecord> old;
  if (node_.record_annotation) {
    auto dec = DecodeRecord(*node_.record_annotation);
    if (dec.ok()) old = *dec;
  }
  rec_ = old.value_or(RemediationRecord{});
  const NodeTaint* our_taint = OurTaint();
  if (!old && our_taint) {
    // Record removed (by an admin) or unreadable: re-onboard. Our taint key is ours by name;
    // its value says whether the cordon was ours too.
    rec_.tainted = true;
    rec_.taint_effect = our_taint->effect;
    rec_.cordoned = our_taint->value == kTaintValueCordoned && node_.unschedulable;
  }
  if (memories) {
    rec_.memory.clear();
    for (const auto& [name, m] : *memories) {
      if (!m.empty()) rec_.memory[name] = m;
    }
  } else if (v_.memory.empty()) {
    rec_.memory.erase(v_.policy);
  } else {
    rec_.memory[v_.policy] = v_.memory;
  }

  // An admin uncordoned the node we cordoned: cancel this occurrence.
  if (rec_.Active() && !rec_.cancelled && rec_.cordoned && !node_.unschedulable && !pol_.dry_run) {
    rec_.cordoned = false;
    rec_.cancelled = true;
    rec_.cancelled_at = now_;
    Release("remediation cancelled");
    Event("Normal", kReasonRemediationSkipped,
          "Node was uncordoned by an administrator: remediation of occurrence " + rec_.occurrence +
              " cancelled; nothing more is done until a new occurrence");
  }

  bool fault = v_.state == HealthState::kUnhealthy ||
               (v_.state == HealthState::kUnknown && v_.action >= Action::kTaint);
  std::string prev_state = rec_.state.empty() ? "Healthy" : rec_.state;
  std::string new_state(policy::HealthStateName(v_.state));

  if (fault) {
    bool start = !rec_.Active();
    if (rec_.Active() && rec_.cancelled) {
      // New faults (a GPU or rule not seen in the cancelled occurrence) start a new one.
      for (const auto& g : v_.bad_gpus) start = start || !Contains(rec_.bad_gpus, g);
      for (const auto& r : v_.MatchedRules()) start = start || !Contains(rec_.rules, r);
    }
    if (start) StartOccurrence();
    rec_.policy = v_.policy;
    if (!rec_.cancelled) {
      rec_.rules = v_.MatchedRules();
      rec_.reason = v_.message;
      rec_.bad_gpus = v_.bad_gpus;
      rec_.node_wide = v_.node_wide;
      Apply(std::max(rec_.action, v_.action));
    }
  } else if (v_.state == HealthState::kHealthy) {
    if (rec_.Active()) {
      if (v_.recovered || rec_.cancelled) {
        bool fenced = NodeFenced();
        Release("GPUs healthy for " + FormatDuration(pol_.recovery.healthy_for));
        Event("Normal", kReasonGpuRecovered,
              std::string(fenced ? "GPUs healthy for " + FormatDuration(pol_.recovery.healthy_for) +
                                       "; our remediation was undone"
                                 : "GPUs healthy again") +
                  " (occurrence " + rec_.occurrence + ")");
        rec_.occurrence.clear();
        rec_.action = Action::kNone;
        rec_.rules.clear();
        rec_.reason.clear();
        rec_.bad_gpus.clear();
        rec_.node_wide = false;
        rec_.cancelled = false;
        rec_.cancelled_at.reset();
        rec_.skipped.clear();
        rec_.dry_run = false;
        rec_.drain = DrainRecord{};
        rec_.recovered_at = now_;
      } else if (!rec_.cancelled) {
        Apply(rec_.action);  // hysteresis: hold what we did until healthy for healthyFor
      }
    } else if (NodeFenced()) {
      Release("re-onboarded: GPUs healthy");  // leftovers of a removed record
    } else if (prev_state == "Unknown" && new_state == "Healthy") {
      Event("Normal", kReasonGpuRecovered, "GPU telemetry restored: " + v_.message);
    }
  } else if (rec_.Active() && !rec_.cancelled) {
    Apply(rec_.action);  // Unknown: we cannot tell, so hold (never escalate, never undo)
  }

  if (v_.state == HealthState::kUnknown && prev_state != "Unknown" && v_.action >= Action::kEvent) {
    Event("Warning", kReasonGpuTelemetryLost, v_.message);
  }
  // Absent state means Healthy, so always-healthy nodes need no record at all.
  rec_.state = (new_state == "Healthy" && rec_.state.empty()) ? "" : new_state;

  RemediationRecord base = old.value_or(RemediationRecord{});
  RemediationRecord cmp = rec_;
  cmp.updated_at = base.updated_at;
  if (!(cmp == base)) {
    rec_.updated_at = now_;
    Step s;
    s.kind = StepKind::kWriteRecord;
    s.record = rec_;
    plan_.steps.push_back(std::move(s));
  }
  for (auto& s : node_steps_) plan_.steps.push_back(std::move(s));
  for (auto& s : events_) plan_.steps.push_back(std::move(s));
  return plan_;
}

}  // namespace

PolicyRemediation RemediationFor(const api::GpuHealthPolicy& policy) {
  return PolicyRemediation{policy.name, policy.spec.remediation, policy.spec.recovery,
                           policy.spec.dry_run, policy.spec.paused};
}

std::string_view StepKindName(StepKind k) {
  switch (k) {
    case StepKind::kWriteRecord: return "WriteRecord";
    case StepKind::kSetCondition: return "SetCondition";
    case StepKind::kAddTaint: return "AddTaint";
    case StepKind::kRemoveTaint: return "RemoveTaint";
    case StepKind::kCordon: return "Cordon";
    case StepKind::kUncordon: return "Uncordon";
    case StepKind::kAddDeviceTaint: return "AddDeviceTaint";
    case StepKind::kRemoveDeviceTaint: return "RemoveDeviceTaint";
    case StepKind::kEmitEvent: return "EmitEvent";
  }
  return "";
}

std::vector<PlannedEvent> RemediationPlan::Events() const {
  std::vector<PlannedEvent> out;
  for (const auto& s : steps) {
    if (s.kind == StepKind::kEmitEvent) out.push_back(s.event);
  }
  return out;
}

RemediationPlan Plan(const policy::Verdict& verdict, const NodeView& node,
                     const PolicyRemediation& policy, const BrakeDecision& brake, WallTime now,
                     const std::map<std::string, policy::EvalMemory>* memories) {
  return Planner(verdict, node, policy, brake, now).Run(memories);
}

NodeView ApplyPlan(const NodeView& node, const RemediationPlan& plan) {
  NodeView out = node;
  for (const auto& s : plan.steps) {
    switch (s.kind) {
      case StepKind::kWriteRecord:
        out.record_annotation = EncodeRecord(s.record);
        break;
      case StepKind::kSetCondition:
        out.gpu_condition = NodeConditionView{s.status, s.reason, s.message};
        break;
      case StepKind::kAddTaint: {
        auto it = std::find_if(out.taints.begin(), out.taints.end(),
                               [&](const NodeTaint& t) { return t.key == s.taint.key; });
        if (it != out.taints.end()) {
          *it = s.taint;
        } else {
          out.taints.push_back(s.taint);
        }
        break;
      }
      case StepKind::kRemoveTaint:
        std::erase_if(out.taints, [&](const NodeTaint& t) { return t.key == s.taint.key; });
        break;
      case StepKind::kCordon: out.unschedulable = true; break;
      case StepKind::kUncordon: out.unschedulable = false; break;
      case StepKind::kAddDeviceTaint:
      case StepKind::kRemoveDeviceTaint:
      case StepKind::kEmitEvent: break;
    }
  }
  return out;
}

}  // namespace gg::remediation
