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
    case HealthState::kHealthy:
      return "True";
    case HealthState::kUnhealthy:
      return "False";
    case HealthState::kUnknown:
      return "Unknown";
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

  NodeChange Run(const std::map<std::string, policy::EvalMemory>* memories);

 private:
  // Every Event carries its catalog type.
  void Event(const char* reason, std::string message) {
    if (pol_.dry_run) message = "dry run: " + message;
    events_.push_back({events::TypeOfReason(reason), reason, std::move(message)});
  }
  // Node changes: none in dry run (decide and record, change nothing). Last one wins.
  void SetTaint(const NodeTaint& t) {
    if (pol_.dry_run) return;
    out_.set_taint = t;
    out_.remove_taint = false;
  }
  void RemoveTaint() {
    if (pol_.dry_run) return;
    out_.set_taint.reset();
    out_.remove_taint = true;
  }
  void SetUnschedulable(bool on) {
    if (!pol_.dry_run) out_.unschedulable = on;
  }
  void DeviceTaint(bool create, DeviceTaintChange c) {
    if (pol_.dry_run) return;
    (create ? out_.create_device_taints : out_.delete_device_taints).push_back(std::move(c));
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
           rec_.drain.phase == DrainPhase::kRunning ||
           (rec_.dry_run && rec_.action >= Action::kTaint);
  }
  bool HoldsAnything() const {
    return rec_.Active() || NodeFenced() || OurTaint() || rec_.escalation.has_value();
  }
  // Records why new remediation is held back, announcing it once per distinct reason.
  void HeldBack(std::string why) {
    plan_blocked_ = true;
    if (rec_.skipped != why) {
      rec_.skipped = why;
      Event(events::kRemediationSkipped, std::move(why));
    }
  }
  void SetCondition();
  void LoadRecord(const std::map<std::string, policy::EvalMemory>* memories);
  void CancelOnAdminUncordon();
  void Govern();
  void OnFault();
  void OnHealthy();
  void CloseOccurrence();
  void EndOccurrence();
  // Undo what is ours; `node_level_only`: the taint and the cordon (DRA rules and a running
  // drain stay in the record for the operator to undo).
  void Release(const std::string& why, bool node_level_only = false);
  void StartOccurrence();
  void NoteFence();
  // Nodes no policy governs (Governance other than kGoverned).
  void OnUngoverned();
  void OnExcluded();
  void OnReleased();
  // The ladder: Apply() = brake checks, then dry run or the fences and the drain.
  void Apply(Action target);
  Action CheckBrake(Action target, bool device_level);
  void AnnounceDryRun(Action target, bool device_level);
  void FenceDevices();
  // The unit is already fenced by the DRA driver's own taint: recorded, no rule of ours.
  bool FencedByDriver(const FenceUnit& u, const std::string& effect, const std::string& what);
  void FenceNode(Action target);
  void Escalate();
  void RequestDrain(bool device_level);
  void FinishRecord();

  const policy::Verdict& v_;
  const NodeView& node_;
  const PolicyRemediation& pol_;
  const BrakeDecision& brake_;
  WallTime now_;
  std::optional<RemediationRecord> old_;  // the record as found (nullopt: none/unreadable)
  RemediationRecord rec_;                 // the record as it will be
  std::string prev_state_;                // last announced state ("Healthy" when none)
  bool plan_blocked_ = false;
  bool drain_held_ = false;  // the brake holds back this occurrence's first drain
  std::optional<NodeConditionView> condition_;  // set by a mode; else from the verdict
  NodeChange out_;
  std::vector<PlannedEvent> events_;
};

// The GPUHealthy condition reflects the verdict (except in dry run: no changes), or says why
// the node is held: quarantined, or no policy governs it.
void Planner::SetCondition() {
  std::optional<NodeConditionView> want = condition_;
  if (!want && pol_.governance == Governance::kGoverned) {
    want = NodeConditionView{ConditionStatus(v_.state), v_.reason,
                             v_.message + " [policy " + v_.policy + "]"};
    if (rec_.quarantined && rec_.Active() && !rec_.cancelled) {
      const auto& q = pol_.recovery.quarantine;
      want = NodeConditionView{"False", "Quarantined",
                               "Node fenced " + std::to_string(q.after) + " times within " +
                                   FormatDuration(q.within) +
                                   ": held until `kubectl gpu-guardian release " + node_.name +
                                   "` [policy " + v_.policy + "]"};
    }
  }
  if (want && !pol_.dry_run && (!node_.gpu_condition || !(*node_.gpu_condition == *want))) {
    out_.condition = std::move(*want);
  }
}

void Planner::LoadRecord(const std::map<std::string, policy::EvalMemory>* memories) {
  if (node_.record_annotation) {
    auto dec = DecodeRecord(*node_.record_annotation);
    if (dec.ok()) old_ = *dec;
  }
  rec_ = old_.value_or(RemediationRecord{});
  const NodeTaint* our_taint = OurTaint();
  if (!old_ && our_taint) {
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
  } else if (pol_.governance == Governance::kReleased) {
    // a hand-back decides nothing about health: memories stay as they are
  } else if (v_.memory.empty()) {
    rec_.memory.erase(v_.policy);
  } else {
    rec_.memory[v_.policy] = v_.memory;
  }
  prev_state_ = rec_.state.empty() ? "Healthy" : rec_.state;
}

// An admin uncordoned the node we cordoned: cancel this occurrence.
void Planner::CancelOnAdminUncordon() {
  if (!rec_.Active() || rec_.cancelled || !rec_.cordoned || node_.unschedulable || pol_.dry_run) {
    return;
  }
  rec_.cordoned = false;
  rec_.cancelled = true;
  rec_.cancelled_at = now_;
  Release("remediation cancelled");
  Event(events::kRemediationSkipped,
        "Node was uncordoned by an administrator: remediation of occurrence " + rec_.occurrence +
            " cancelled; nothing more is done until a new occurrence");
}

// Undo every change that is ours (never anything else) and forget the ownership.
void Planner::Release(const std::string& why, bool node_level_only) {
  bool undone = false;
  if (rec_.tainted) {
    if (OurTaint()) {
      RemoveTaint();
      undone = true;
    }
    rec_.tainted = false;
    rec_.taint_effect.clear();
  }
  if (rec_.cordoned) {
    if (node_.unschedulable) {
      SetUnschedulable(false);
      Event(events::kNodeUncordoned, "Node uncordoned: " + why);
      undone = true;
    }
    rec_.cordoned = false;
  }
  if (node_level_only) {
    if (undone) out_.ends_node_fence = true;
    return;
  }
  for (const auto& d : rec_.device_taints) {
    DeviceTaint(false, DeviceTaintChange{d.gpu_uuid, d.effect, "", "", d.rule_name});
    undone = true;
  }
  rec_.device_taints.clear();
  if (rec_.escalation) {
    out_.delete_escalation = rec_.escalation;
    rec_.escalation.reset();
    undone = true;
  }
  if (rec_.drain.phase == DrainPhase::kRunning) {
    if (!pol_.dry_run) out_.stop_drain = true;
    rec_.drain.phase = DrainPhase::kCancelled;
    rec_.drain.finished_at = now_;
  }
  if (undone) out_.ends_node_fence = true;
}

void Planner::StartOccurrence() {
  rec_.occurrence =
      node_.name + "-" +
      std::to_string(
          std::chrono::duration_cast<std::chrono::seconds>(now_.time_since_epoch()).count());
  rec_.started_at = now_;
  rec_.cancelled = false;
  rec_.cancelled_at.reset();
  rec_.action = Action::kNone;
  rec_.drain = DrainRecord{};
  rec_.skipped.clear();
  rec_.dry_run = pol_.dry_run;
  // Unknown: GPUTelemetryLost is announced by the state transition (FinishRecord).
  if (v_.state != HealthState::kUnknown) Event(events::kGPUUnhealthy, v_.message);
}

// Brake: starting to fence a node (or a GPU) that is not fenced yet is new remediation, and
// so is starting a drain. Returns the step the ladder may reach.
Action Planner::CheckBrake(Action target, bool device_level) {
  const Action old = rec_.action;
  if (target >= Action::kTaint && !NodeFenced()) {
    if (!brake_.allow_new_node || (device_level && !brake_.allow_new_device)) {
      HeldBack("Remediation held back by the brake: " + brake_.reason);
      target = std::max(old, Action::kEvent);
    } else {
      out_.starts_node_fence = !pol_.dry_run;
      rec_.skipped.clear();
      if (!pol_.dry_run) NoteFence();
    }
  }
  if (target >= Action::kDrain && rec_.drain.phase == DrainPhase::kNone &&
      !(pol_.dry_run && old >= Action::kDrain) && !brake_.allow_new_drain) {
    HeldBack("Drain held back by the brake: " + brake_.reason);
    drain_held_ = true;
    target = std::max(old, Action::kCordon);
  }
  return target;
}

// Dry run: decide and record, change nothing; one Event per step up the ladder.
void Planner::AnnounceDryRun(Action target, bool device_level) {
  if (target > rec_.action && target >= Action::kTaint) {
    Event(events::kRemediationSkipped,
          "would " + std::string(api::ActionName(target)) + " node " +
              (device_level ? "(device-level, GPUs " : "(node-level, ") +
              std::to_string(v_.bad_gpus.size()) + " bad GPU(s)): " + v_.message);
  }
}

// One DeviceTaintRule per fence unit (a bad GPU, or a MIG device of one) not fenced yet. The
// device budget counts every unit, also the second one of a node already fenced.
void Planner::FenceDevices() {
  const std::string effect = DeviceEffect(pol_.remediation.device_taint_effect);
  std::optional<int64_t> left = brake_.devices_left;
  bool held = false;
  std::vector<FenceUnit> units = node_.fence_units;
  if (units.empty()) {
    for (const auto& g : v_.bad_gpus) units.push_back({g, g, false});
  }
  for (const auto& u : units) {
    bool have = false;
    for (const auto& d : rec_.device_taints) have = have || d.gpu_uuid == u.uuid;
    if (have) continue;
    const std::string what = (u.Mig() ? "MIG device " + u.uuid + " of GPU " : "GPU ") + u.gpu_uuid;
    if (FencedByDriver(u, effect, what)) continue;
    if (left && *left <= 0) {
      held = true;
      HeldBack("Device-level remediation of " + what + " held back by the brake: " +
               (brake_.reason.empty() ? "maxDevicesPerHour reached" : brake_.reason));
      continue;
    }
    if (left) --*left;
    DeviceTaintChange c{u.uuid, effect, DeviceReason(u.gpu_uuid), v_.message, ""};
    DeviceTaintRecord rec;
    rec.gpu_uuid = u.uuid;
    rec.effect = effect;
    rec.since = now_;
    rec_.device_taints.push_back(std::move(rec));
    ++out_.device_fences_started;
    Event(events::kNodeTainted, what + " tainted " + api::kTaintKey + "=" + c.reason + ":" +
                                    effect +
                                    " (device-level DeviceTaintRule; the node stays schedulable)");
    DeviceTaint(true, std::move(c));
  }
  if (!held && rec_.skipped.starts_with("Device-level")) rec_.skipped.clear();
}

bool Planner::FencedByDriver(const FenceUnit& u, const std::string& effect,
                             const std::string& what) {
  const DriverTaint* by = nullptr;
  for (const auto& t : node_.driver_taints) {
    if (t.uuid == u.uuid && DriverTaintCovers(t.effect, effect) &&
        (!by || DeviceEffectRank(t.effect) > DeviceEffectRank(by->effect))) {
      by = &t;
    }
  }
  if (!by) return false;
  DeviceTaintRecord rec;
  rec.gpu_uuid = u.uuid;
  rec.effect = by->effect;
  rec.since = now_;
  rec.device = by->device.ToString();
  rec.driver_taint = by->ToString();
  rec_.device_taints.push_back(std::move(rec));
  Event(events::kDeviceTaintedByDriver,
        what + " (" + by->device.ToString() + ") is tainted " + by->ToString() +
            " by its DRA driver: counted as fenced, no DeviceTaintRule of ours added");
  return true;
}

void Planner::FenceNode(Action target) {
  if (target >= Action::kCordon && !rec_.cordoned && !node_.unschedulable) {
    SetUnschedulable(true);
    rec_.cordoned = true;
    Event(events::kNodeCordoned, "Node cordoned: " + v_.message);
  }
  // (node already unschedulable and not ours: an admin's cordon, left alone and not owned)
  if (target < Action::kTaint) return;
  NodeTaint desired{api::kTaintKey, rec_.cordoned ? kTaintValueCordoned : kTaintValueTainted,
                    std::string(api::TaintEffectName(pol_.remediation.taint_effect))};
  const NodeTaint* cur = OurTaint();
  if (!cur || !(*cur == desired)) {
    SetTaint(desired);
    if (!cur) Event(events::kNodeTainted, "Node tainted " + desired.key + ":" + desired.effect);
  }
  rec_.tainted = true;
  rec_.taint_effect = desired.effect;
}

void Planner::RequestDrain(bool device_level) {
  DrainRequest req;
  req.spec = pol_.remediation.drain;
  if (device_level) {
    for (const auto& d : rec_.device_taints) req.gpu_uuids.push_back(d.gpu_uuid);
  }
  if (rec_.drain.phase == DrainPhase::kNone) {
    rec_.drain.phase = DrainPhase::kRunning;
    rec_.drain.started_at = now_;
    req.start = true;
    out_.starts_drain = true;
  }
  if (rec_.drain.phase == DrainPhase::kRunning) {
    req.deadline = rec_.drain.started_at.value_or(now_) + pol_.remediation.drain.timeout;
    out_.drain = req;
  }
}

// remediation.escalate: once this occurrence's drain has finished (Done or Blocked), hand the
// node to the external remediator: one remediation object per occurrence, recorded as ours.
void Planner::Escalate() {
  const auto& tmpl = pol_.remediation.escalate;
  if (!tmpl || pol_.dry_run || !rec_.Active() || rec_.cancelled || rec_.escalation) return;
  if (rec_.drain.phase != DrainPhase::kCompleted && rec_.drain.phase != DrainPhase::kBlocked) {
    return;
  }
  out_.create_escalation = *tmpl;
  rec_.escalation =
      EscalationRecord{tmpl->api_version, tmpl->RemediationKind(), tmpl->namespace_, node_.name};
  Event(events::kRemediationEscalated,
        "Node handed to external remediation: " + tmpl->RemediationKind() + " " + tmpl->namespace_ +
            "/" + node_.name + " from template " + tmpl->kind + " " + tmpl->namespace_ + "/" +
            tmpl->name + " (occurrence " + rec_.occurrence + ", drain " +
            std::string(DrainPhaseName(rec_.drain.phase)) + ")");
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
  target = CheckBrake(target, device_level);
  if (pol_.dry_run) {
    AnnounceDryRun(target, device_level);
    rec_.action = std::max(rec_.action, target);
    return;
  }
  if (device_level && target >= Action::kTaint) FenceDevices();
  if (!device_level) FenceNode(target);
  // Effect None only announces: nothing is fenced, so nothing is evicted either.
  bool want_drain =
      target >= Action::kDrain && !drain_held_ &&
      !(device_level && pol_.remediation.device_taint_effect == api::DeviceTaintEffect::kNone);
  if (want_drain) RequestDrain(device_level);
  rec_.action = std::max(rec_.action, target);
}

void Planner::OnFault() {
  bool start = !rec_.Active();
  if (rec_.Active() && rec_.cancelled) {
    // New faults (a GPU or rule not seen in the cancelled occurrence) start a new one.
    for (const auto& g : v_.bad_gpus) start = start || !Contains(rec_.bad_gpus, g);
    for (const auto& r : v_.MatchedRules()) start = start || !Contains(rec_.rules, r);
  }
  if (start) StartOccurrence();
  rec_.policy = v_.policy;
  if (rec_.cancelled) return;
  rec_.rules = v_.MatchedRules();
  rec_.reason = v_.message;
  rec_.bad_gpus = v_.bad_gpus;
  rec_.node_wide = v_.node_wide;
  Apply(std::max(rec_.action, v_.action));
}

// Repeat offenders: one more fence in the bounded history; fenced quarantine.after times
// within quarantine.within, the node is held until released by hand.
void Planner::NoteFence() {
  rec_.fences.push_back(now_);
  if (rec_.fences.size() > kFenceHistoryMax) {
    rec_.fences.erase(rec_.fences.begin(),
                      rec_.fences.end() - static_cast<std::ptrdiff_t>(kFenceHistoryMax));
  }
  const api::QuarantineSpec& q = pol_.recovery.quarantine;
  if (q.after <= 0 || rec_.quarantined) return;
  const auto recent = std::count_if(rec_.fences.begin(), rec_.fences.end(),
                                    [&](WallTime t) { return t > now_ - q.within; });
  if (recent < q.after) return;
  rec_.quarantined = true;
  rec_.quarantined_at = now_;
  Event(events::kNodeQuarantined,
        "Node fenced " + std::to_string(recent) + " times within " + FormatDuration(q.within) +
            " (recovery.quarantine.after " + std::to_string(q.after) +
            "): quarantined; it stays fenced until `kubectl gpu-guardian release " + node_.name +
            " --reason TEXT`");
}

// Healthy for healthyFor (or a cancelled occurrence): undo ours, close the occurrence.
void Planner::CloseOccurrence() {
  const bool fenced = NodeFenced();
  const std::string healthy_for =
      FormatDuration(pol_.governance == Governance::kGoverned
                         ? pol_.recovery.healthy_for
                         : rec_.healthy_for.value_or(pol_.recovery.healthy_for));
  const std::string scope =
      pol_.governance == Governance::kUngoverned ? " (no policy governs the node)" : "";
  Release("GPUs healthy for " + healthy_for + scope);
  Event(events::kGPURecovered,
        std::string(fenced ? "GPUs healthy for " + healthy_for + "; our remediation was undone"
                           : "GPUs healthy again") +
            scope + " (occurrence " + rec_.occurrence + ")");
  EndOccurrence();
}

// Forget the occurrence (what was ours has been released).
void Planner::EndOccurrence() {
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
  rec_.quarantined = false;
  rec_.quarantined_at.reset();
  rec_.ungoverned_since.reset();
  rec_.healthy_for.reset();
  rec_.automatic_recovery = true;
}

void Planner::OnHealthy() {
  if (rec_.Active()) {
    if (rec_.cancelled || (v_.recovered && !rec_.quarantined)) {
      CloseOccurrence();
    } else {
      // hysteresis: hold what we did until healthy for healthyFor (quarantined: until released)
      Apply(rec_.action);
    }
  } else if (NodeFenced()) {
    Release("re-onboarded: GPUs healthy");  // leftovers of a removed record
  } else if (prev_state_ == "Unknown") {
    Event(events::kGPURecovered, "GPU telemetry restored: " + v_.message);
  }
}

// State-transition Events, then the record when it changed.
void Planner::FinishRecord() {
  const std::string new_state(policy::HealthStateName(v_.state));
  if (v_.state == HealthState::kUnknown && prev_state_ != "Unknown" &&
      v_.action >= Action::kEvent) {
    Event(events::kGPUTelemetryLost, v_.message);
  }
  // Absent state means Healthy, so always-healthy nodes need no record at all.
  rec_.state = (new_state == "Healthy" && rec_.state.empty()) ? "" : new_state;
  RemediationRecord base = old_.value_or(RemediationRecord{});
  RemediationRecord cmp = rec_;
  cmp.updated_at = base.updated_at;
  if (!(cmp == base)) {
    rec_.updated_at = now_;
    out_.record = rec_;
  }
}

// A policy governs the node: the verdict decides.
void Planner::Govern() {
  rec_.ungoverned_since.reset();
  CancelOnAdminUncordon();
  // A hand-back (`release`) leaves our DRA rules and a running drain to us: undo them now.
  if (rec_.Active() && rec_.cancelled) Release("remediation cancelled");
  const bool fault = v_.state == HealthState::kUnhealthy ||
                     (v_.state == HealthState::kUnknown && v_.action >= Action::kTaint);
  if (fault) {
    OnFault();
  } else if (v_.state == HealthState::kHealthy) {
    OnHealthy();
  } else if (rec_.Active() && !rec_.cancelled) {
    Apply(rec_.action);  // Unknown: we cannot tell, so hold (never escalate, never undo)
  }
  Escalate();
  // The recovery settings the node is fenced under, for when no policy governs it any more.
  if (rec_.Active() && !rec_.cancelled) {
    rec_.healthy_for = pol_.recovery.healthy_for;
    rec_.automatic_recovery = pol_.recovery.automatic;
  }
}

// No policy selects the fenced node any more: hold our fences (no new ones, no drain) until
// the report has been healthy for the recorded healthyFor, then release them.
void Planner::OnUngoverned() {
  const std::string healthy_for =
      FormatDuration(rec_.healthy_for.value_or(pol_.recovery.healthy_for));
  const std::string until = rec_.quarantined ? "until released with `kubectl gpu-guardian release`"
                            : !rec_.automatic_recovery
                                ? "until released with `kubectl gpu-guardian release` "
                                  "(recovery.automatic was false)"
                                : "until the GPU report has been healthy for " + healthy_for;
  if (!rec_.ungoverned_since) {
    rec_.ungoverned_since = now_;
    Event(events::kNodeUngoverned,
          "No valid GPUHealthPolicy selects the node any more (fenced under policy " + rec_.policy +
              "): gpu-guardian holds its fences " + until + ", then releases them");
  }
  if (rec_.drain.phase == DrainPhase::kRunning) {  // nobody asks for it any more
    out_.stop_drain = true;
    rec_.drain.phase = DrainPhase::kCancelled;
    rec_.drain.finished_at = now_;
  }
  if (rec_.cancelled || (v_.recovered && !rec_.quarantined) || !HoldsAnything()) {
    CloseOccurrence();
    condition_ = NodeConditionView{"Unknown", "Ungoverned",
                                   "No valid GPUHealthPolicy selects the node; gpu-guardian "
                                   "released its fences"};
    return;
  }
  condition_ = NodeConditionView{"Unknown", "Ungoverned",
                                 "No valid GPUHealthPolicy selects the node; gpu-guardian holds "
                                 "its fences " +
                                     until + " (report: " + v_.reason + ")"};
}

// gpuguardian.io/exclude=true: the administrator asked us to leave; undo everything of ours.
void Planner::OnExcluded() {
  const std::string why = "node excluded by label " + std::string(api::kExcludeLabel) + "=true";
  Release(why);
  Event(events::kNodeReleased, "gpu-guardian released its fences: " + why);
  EndOccurrence();
  condition_ = NodeConditionView{"Unknown", "Excluded",
                                 "Node excluded by label " + std::string(api::kExcludeLabel) +
                                     "=true: gpu-guardian released its fences and decides nothing "
                                     "for it"};
}

// `kubectl gpu-guardian release`: hand the node back now (the record says who asked and why).
void Planner::OnReleased() {
  const bool leftovers = !rec_.device_taints.empty() || rec_.drain.phase == DrainPhase::kRunning;
  Release("released by kubectl gpu-guardian release: " + pol_.release_reason,
          /*node_level_only=*/true);
  if (rec_.Active()) {
    rec_.cancelled = true;
    rec_.cancelled_at = now_;
  }
  rec_.quarantined = false;
  rec_.quarantined_at.reset();
  rec_.fences.clear();
  rec_.released_reason = pol_.release_reason;
  rec_.released_at = now_;
  Event(events::kNodeReleased,
        "Node handed back by `kubectl gpu-guardian release`: " + pol_.release_reason +
            (leftovers ? " (the operator removes its DRA device taints and stops its drain)" : ""));
}

NodeChange Planner::Run(const std::map<std::string, policy::EvalMemory>* memories) {
  out_.requeue_at = v_.next_evaluation;
  if (pol_.paused) return out_;
  LoadRecord(memories);
  switch (pol_.governance) {
    case Governance::kGoverned:
      Govern();
      break;
    case Governance::kUngoverned:
      OnUngoverned();
      break;
    case Governance::kExcluded:
      OnExcluded();
      break;
    case Governance::kReleased:
      OnReleased();
      break;
  }
  if (pol_.governance != Governance::kReleased) SetCondition();
  FinishRecord();
  out_.brake_blocked = plan_blocked_;
  out_.events = std::move(events_);
  return out_;
}

}  // namespace

PolicyRemediation RemediationFor(const api::GpuHealthPolicy& policy) {
  return PolicyRemediation{policy.name,
                           policy.spec.remediation,
                           policy.spec.recovery,
                           policy.spec.dry_run,
                           policy.spec.paused,
                           Governance::kGoverned,
                           ""};
}

bool HoldsOurs(const NodeView& node, const std::optional<RemediationRecord>& r) {
  for (const auto& t : node.taints) {
    if (t.key == api::kTaintKey) return true;
  }
  return r && (r->Active() || r->tainted || r->cordoned || !r->device_taints.empty() ||
               r->drain.phase == DrainPhase::kRunning || r->quarantined || r->escalation);
}

NodeChange PlanRelease(const NodeView& node, const std::string& reason, WallTime now) {
  std::optional<RemediationRecord> rec;
  if (node.record_annotation) {
    auto dec = DecodeRecord(*node.record_annotation);
    if (dec.ok()) rec = *dec;
  }
  if (!HoldsOurs(node, rec)) return NodeChange{};
  policy::Verdict v;
  v.policy = rec ? rec->policy : "";
  PolicyRemediation pol;
  pol.policy = v.policy;
  pol.governance = Governance::kReleased;
  pol.release_reason = reason;
  const BrakeDecision brake = BrakeAllowAll();
  return Planner(v, node, pol, brake, now).Run(nullptr);
}

NodeChange Plan(const policy::Verdict& verdict, const NodeView& node,
                const PolicyRemediation& policy, const BrakeDecision& brake, WallTime now,
                const std::map<std::string, policy::EvalMemory>* memories) {
  return Planner(verdict, node, policy, brake, now).Run(memories);
}

NodeView ApplyChange(const NodeView& node, const NodeChange& change) {
  NodeView out = node;
  if (change.record) out.record_annotation = EncodeRecord(*change.record);
  if (change.condition) out.gpu_condition = change.condition;
  if (change.remove_taint || change.set_taint) {
    std::erase_if(out.taints, [](const NodeTaint& t) { return t.key == api::kTaintKey; });
  }
  if (change.set_taint) out.taints.push_back(*change.set_taint);
  if (change.unschedulable) out.unschedulable = *change.unschedulable;
  return out;
}

}  // namespace gg::remediation
