// NodeReconciler: one pass = read caches → decide (pure) → apply the difference.
#include "operator/node_reconciler.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "common/time_util.h"
#include "policy/evaluate.h"
#include "remediation/plan.h"

namespace gg::op {
namespace {

using remediation::StepKind;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The report for `node`: the GPUNodeHealth status, else the seed-compatible annotation.
// NotFound: no report at all; another error: a report that cannot be read (→ Unknown).
StatusOr<api::GpuNodeHealthStatus> ReadReport(const ClusterView& view, const k8s::Node& node) {
  if (auto obj = view.Report(node.meta.name)) {
    if (obj->status) return *obj->status;
    if (!obj->decode_error.empty()) return InvalidArgumentError(obj->decode_error);
  }
  if (auto a = node.meta.annotations.Get(api::kHealthAnnotation)) {
    auto r = api::DecodeHealthAnnotation(*a);
    if (!r.ok()) return InvalidArgumentError("annotation " + std::string(api::kHealthAnnotation) +
                                             ": " + r.status().message());
    return r;
  }
  return NotFoundError("no report");
}

remediation::NodeView ToNodeView(const k8s::Node& node) {
  remediation::NodeView v;
  v.name = node.meta.name;
  // Plan reads only the opt-out label: copying all ~50 labels (~100 allocations) per pass
  // was wasted work.
  if (auto ex = node.meta.labels.Get(api::kExcludeLabel)) v.labels.emplace(api::kExcludeLabel, *ex);
  v.unschedulable = node.unschedulable;
  for (const auto& t : node.taints) v.taints.push_back({t.key, t.value, t.effect});
  if (auto a = node.meta.annotations.Get(api::kRemediationAnnotation)) v.record_annotation = std::string(*a);
  if (const auto* c = node.FindCondition(api::kConditionType)) {
    v.gpu_condition = remediation::NodeConditionView{c->status, c->reason, c->message};
  }
  return v;
}

std::string_view StepAction(StepKind k) {
  switch (k) {
    case StepKind::kAddTaint: return "taint";
    case StepKind::kRemoveTaint: return "untaint";
    case StepKind::kCordon: return "cordon";
    case StepKind::kUncordon: return "uncordon";
    case StepKind::kAddDeviceTaint: return "device_taint";
    case StepKind::kRemoveDeviceTaint: return "device_untaint";
    default: return "";
  }
}

}  // namespace

remediation::DrainSpec ToDrainSpec(const api::DrainSpec& s) {
  remediation::DrainSpec out;
  out.scope = s.scope == api::DrainScope::kAllPods ? remediation::DrainScope::kAllPods
                                                   : remediation::DrainScope::kGpuPods;
  for (const auto& st : s.order) out.order.push_back({st.priority_below, std::nullopt});
  out.grace_period_seconds = s.grace_period_seconds;
  out.delete_empty_dir_data = s.delete_empty_dir_data;
  out.force = s.force;
  return out;
}

StatusOr<bool> NodeReconciler::DeviceLevelPossible(
    const std::string& node, const policy::Verdict& verdict, const api::RemediationSpec& rem,
    const std::optional<remediation::RemediationRecord>& record, remediation::GpuDeviceMap* map) {
  if (rem.device_level != api::DeviceLevelMode::kAuto || d_.dra == nullptr) return false;
  auto fenced = [&](const std::string& uuid) {
    if (!record) return false;
    for (const auto& d : record->device_taints) {
      if (d.gpu_uuid == uuid) return true;
    }
    return false;
  };
  std::vector<std::string> need;  // bad GPUs without a DeviceTaintRule yet
  if (verdict.state == policy::HealthState::kUnhealthy && !verdict.node_wide) {
    for (const auto& g : verdict.bad_gpus) {
      if (!fenced(g)) need.push_back(g);
    }
  }
  const bool holding = record && !record->device_taints.empty();
  if (need.empty() && !holding) return false;  // nothing device-level to decide: no API calls
  auto caps = d_.dra->Capabilities();
  if (!caps.ok()) return caps.status();  // transient: requeue, never fence the node instead
  if (!caps->UsableFor(rem.device_taint_effect)) return false;  // announced on the policy
  if (need.empty()) return true;
  auto m = d_.dra->MapGpus(node, rem.device_driver, need);
  if (!m.ok()) return m.status();
  *map = std::move(*m);
  if (!map->unmapped.empty()) {
    std::string list;
    for (const auto& u : map->unmapped) list += (list.empty() ? "" : ",") + u;
    d_.log.Info("GPUs not published through DRA: node-level remediation",
                {{"node", node}, {"driver", rem.device_driver}, {"gpus", list}});
    return false;
  }
  return true;
}

namespace {
std::uint64_t RvNum(std::string_view rv) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  return ec == std::errc() && p == rv.data() + rv.size() ? v : 0;
}
}  // namespace

bool NodeReconciler::CacheBehindOwnWrite(const std::string& node, const std::string& cache_rv) {
  std::scoped_lock lock(written_mu_);
  const std::uint64_t have = RvNum(cache_rv);
  // An echo this pass has already seen in the cache (its event raced our bookkeeping).
  if (auto e = condition_echo_.find(node); e != condition_echo_.end() && (have == 0 || have >= e->second)) {
    condition_echo_.erase(e);
  }
  auto it = written_rv_.find(node);
  if (it == written_rv_.end()) return false;
  if (have == 0 || have >= it->second) {  // caught up (or not comparable: never wait)
    written_rv_.erase(it);
    return false;
  }
  condition_echo_.erase(node);  // this pass waits for the echo: it must enqueue the node
  return true;
}

void NodeReconciler::NoteOwnWrite(const std::string& node, const std::string& rv) {
  const std::uint64_t v = RvNum(rv);
  if (v == 0) return;
  std::scoped_lock lock(written_mu_);
  auto& cur = written_rv_[node];
  cur = std::max(cur, v);
}

bool NodeReconciler::ConsumeOwnConditionEcho(const std::string& node, const std::string& rv) {
  const std::uint64_t v = RvNum(rv);
  std::scoped_lock lock(written_mu_);
  auto it = condition_echo_.find(node);
  if (it == condition_echo_.end()) return false;
  const bool echo = v != 0 && v == it->second;
  if (v == 0 || v >= it->second) condition_echo_.erase(it);
  if (echo) {
    // The cache has reached our write too.
    auto w = written_rv_.find(node);
    if (w != written_rv_.end() && w->second <= v) written_rv_.erase(w);
  }
  return echo;
}

StatusOr<runtime::Result> NodeReconciler::Reconcile(const std::string& name, std::stop_token) {
  const WallTime now = d_.clock.Now();
  auto node = d_.view.Node(name);
  if (!node) {
    {
      std::scoped_lock lock(written_mu_);
      written_rv_.erase(name);
      condition_echo_.erase(name);
    }
    d_.drains.Cancel(name);
    d_.metrics.ForgetNode(name);
    return runtime::Result{};
  }
  if (CacheBehindOwnWrite(name, node->meta.resource_version)) {
    // The echo of our write enqueues the node; the requeue only covers a lost event.
    runtime::Result wait;
    wait.requeue_after = std::chrono::seconds(1);
    return wait;
  }
  const k8s::LabelMap& labels = node->meta.labels;
  if (labels.Get(api::kExcludeLabel) == "true") {
    // Opted out: no decisions, no writes (a running drain of ours stops).
    d_.drains.Cancel(name);
    d_.index.SetExcluded(name, true);
    for (const auto& p : d_.index.SetVerdicts(name, {}, "")) d_.enqueue_policy(p);
    d_.metrics.ForgetNode(name);
    return runtime::Result{};
  }

  // Policies selecting this node (valid ones only; an invalid policy acts on nothing).
  std::vector<std::shared_ptr<const PolicyObject>> holders;
  std::vector<const api::GpuHealthPolicy*> policies;
  for (auto& obj : d_.view.Policies()) {
    const api::GpuHealthPolicy* p = UsablePolicy(*obj);
    if (p && SelectorMatches(p->spec.node_selector, labels)) {
      holders.push_back(obj);
      policies.push_back(p);
    }
  }
  if (policies.empty()) {
    for (const auto& p : d_.index.SetVerdicts(name, {}, "")) d_.enqueue_policy(p);
    d_.metrics.ForgetNode(name);
    return runtime::Result{};
  }

  std::optional<remediation::RemediationRecord> record;
  if (auto a = node->meta.annotations.Get(api::kRemediationAnnotation)) {
    auto r = remediation::DecodeRecord(*a);
    if (r.ok()) record = std::move(r).value();
  }
  auto report = ReadReport(d_.view, *node);

  std::vector<policy::Verdict> verdicts;
  std::map<std::string, policy::EvalMemory> memories;
  std::map<std::string, policy::HealthState> states;
  for (const auto* p : policies) {
    policy::EvalMemory prior;
    if (record) {
      if (auto it = record->memory.find(p->name); it != record->memory.end()) prior = it->second;
    }
    policy::Verdict v = policy::EvaluateReport(*p, report, prior, now);
    memories[p->name] = v.memory;
    states[p->name] = v.state;
    verdicts.push_back(std::move(v));
  }
  std::optional<policy::Verdict> verdict = policy::Resolve(verdicts);
  if (!verdict) return runtime::Result{};
  const api::GpuHealthPolicy* winner = policies.front();
  for (const auto* p : policies) {
    if (p->name == verdict->policy) winner = p;
  }

  // A finished drain's outcome goes into the record before planning.
  bool record_dirty = false;
  struct DrainEvent {
    std::string reason, message;
  };
  std::optional<DrainEvent> drain_event;
  std::optional<remediation::DrainResult> drain_result;
  if (record && record->drain.phase == remediation::DrainPhase::kRunning) {
    drain_result = d_.drains.Result(name);
    if (drain_result) {
      std::string reason;
      if (drain_result->state == remediation::DrainState::kDone) {
        reason = remediation::MarkDrainCompleted(*record, now);
      } else {
        std::string msg = drain_result->message;
        for (const auto& b : drain_result->blocking) msg += "; " + b;
        reason = remediation::MarkDrainBlocked(*record, msg, now);
      }
      record_dirty = true;
      std::string message = drain_result->state == remediation::DrainState::kDone
                                ? "drained node " + name + ": " + drain_result->message
                                : "drain of node " + name + " blocked: " + record->drain.message;
      drain_event = DrainEvent{reason, message};
      d_.metrics.drains.WithLabels({std::string(remediation::DrainStateName(drain_result->state))}).Inc();
    }
  } else {
    d_.drains.Forget(name);
  }

  remediation::NodeView view = ToNodeView(*node);
  if (record_dirty) view.record_annotation = remediation::EncodeRecord(*record);
  remediation::GpuDeviceMap device_map;
  {
    auto dl = DeviceLevelPossible(name, *verdict, winner->spec.remediation, record, &device_map);
    if (!dl.ok()) return dl.status();
    view.dra_devices = *dl;
  }

  // The brake: serialize any decision that may start a fence or a drain.
  std::unique_lock brake_lock(brake_mu_, std::defer_lock);
  remediation::BrakeDecision brake = remediation::BrakeAllowAll();
  if (verdict->action >= api::Action::kTaint) {
    brake_lock.lock();
    brake = remediation::CheckBrake(winner->spec.safety,
                                    d_.index.BrakeInputFor(winner->name, winner->spec.node_selector),
                                    now);
  }
  remediation::PolicyRemediation pr = remediation::RemediationFor(*winner);
  remediation::RemediationPlan plan = remediation::Plan(*verdict, view, pr, brake, now, &memories);

  // Translate the steps into one Node patch + a condition patch + Events.
  NodeSpecChange change;
  change.resource_version = node->meta.resource_version;
  std::vector<k8s::Taint> taints = node->taints;
  bool taints_changed = false;
  std::optional<remediation::RemediationRecord> written;
  std::optional<k8s::NodeCondition> condition;
  std::vector<remediation::PlannedEvent> events;
  std::vector<std::string_view> actions;
  for (const auto& step : plan.steps) {
    switch (step.kind) {
      case StepKind::kWriteRecord:
        written = step.record;
        break;
      case StepKind::kSetCondition: {
        k8s::NodeCondition c;
        c.type = api::kConditionType;
        c.status = step.status;
        c.reason = step.reason;
        c.message = step.message;
        const auto* cur = node->FindCondition(api::kConditionType);
        c.last_transition_time = (cur && cur->status == c.status && cur->last_transition_time)
                                     ? cur->last_transition_time
                                     : std::optional<WallTime>(now);
        c.last_heartbeat_time = now;
        condition = c;
        break;
      }
      case StepKind::kAddTaint: {
        auto it = std::find_if(taints.begin(), taints.end(),
                               [&](const k8s::Taint& t) { return t.key == step.taint.key; });
        k8s::Taint t{step.taint.key, step.taint.value, step.taint.effect, now};
        if (it == taints.end()) {
          taints.push_back(t);
        } else {
          t.time_added = it->time_added ? it->time_added : t.time_added;
          *it = t;
        }
        taints_changed = true;
        actions.push_back(StepAction(step.kind));
        break;
      }
      case StepKind::kRemoveTaint:
        std::erase_if(taints, [&](const k8s::Taint& t) { return t.key == step.taint.key; });
        taints_changed = true;
        actions.push_back(StepAction(step.kind));
        break;
      case StepKind::kCordon:
        change.unschedulable = true;
        actions.push_back(StepAction(step.kind));
        break;
      case StepKind::kUncordon:
        change.unschedulable = false;
        actions.push_back(StepAction(step.kind));
        break;
      case StepKind::kAddDeviceTaint: {
        // Before the Node patch: a rule that exists without its record entry is found again
        // (same name, ours) on the next pass; a record entry without its rule would never be.
        auto it = device_map.by_uuid.find(step.gpu_uuid);
        if (d_.dra == nullptr || it == device_map.by_uuid.end()) {
          return FailedPreconditionError("GPU " + step.gpu_uuid + " of node " + name +
                                         " has no DRA device to taint");
        }
        remediation::DeviceTaintRuleSpec rs;
        rs.node = name;
        rs.gpu_uuid = step.gpu_uuid;
        rs.device = it->second;
        rs.reason = step.reason;
        rs.effect = step.effect;
        rs.message = step.message;
        rs.policy = winner->name;
        bool created = false;
        auto rule = d_.dra->EnsureRule(rs, &created);
        if (!rule.ok()) {
          d_.metrics.Remediation(StepAction(step.kind), kResultFailure);
          return rule.status();
        }
        if (written) {
          for (auto& dt : written->device_taints) {
            if (dt.gpu_uuid != step.gpu_uuid) continue;
            dt.rule_name = *rule;
            dt.device = it->second.ToString();
          }
        }
        // A retried pass finds its own rule: counted once, when it was created.
        if (created) d_.metrics.Remediation(StepAction(step.kind), kResultSuccess);
        break;
      }
      case StepKind::kRemoveDeviceTaint: {
        std::string rule;
        if (record) {
          for (const auto& dt : record->device_taints) {
            if (dt.gpu_uuid == step.gpu_uuid) rule = dt.rule_name;
          }
        }
        if (rule.empty() || d_.dra == nullptr) break;  // never created
        bool skipped = false;
        Status s = d_.dra->DeleteOurRule(rule, &skipped);
        if (!s.ok()) {
          d_.metrics.Remediation(StepAction(step.kind), kResultFailure);
          return s;
        }
        if (skipped) {
          d_.log.Info("DeviceTaintRule not ours: left alone", {{"node", name}, {"rule", rule}});
        }
        d_.metrics.Remediation(StepAction(step.kind), skipped ? kResultSkipped : kResultSuccess);
        break;
      }
      case StepKind::kEmitEvent:
        events.push_back(step.event);
        break;
    }
  }
  if (!written && record_dirty) written = *record;
  if (written) change.annotations[api::kRemediationAnnotation] = remediation::EncodeRecord(*written);
  if (taints_changed) change.taints = taints;

  if (!change.Empty()) {
    auto rv = d_.writer.PatchNode(name, change);
    if (!rv.ok()) {
      for (auto a : actions) d_.metrics.Remediation(a, kResultFailure);
      return rv.status();
    }
    NoteOwnWrite(name, *rv);
    if (written) d_.index.ApplyOwnRecord(name, *written);
    for (auto a : actions) d_.metrics.Remediation(a, kResultSuccess);
    if (plan.starts_node_fence && report.ok()) {
      double secs = std::chrono::duration<double>(d_.clock.Now() - report->observed_at).count();
      if (secs >= 0) d_.metrics.detection_to_action.WithLabels({}).Observe(secs);
    }
    d_.log.Info("node updated", {{"node", name},
                                 {"state", policy::HealthStateName(verdict->state)},
                                 {"policy", verdict->policy},
                                 {"steps", static_cast<long long>(plan.steps.size())}});
  }
  brake_lock = {};  // the index now reflects what we started

  if (condition) {
    auto rv = d_.writer.PatchCondition(name, *condition);
    if (!rv.ok()) return rv.status();
    NoteOwnWrite(name, *rv);
    // Only when the condition was the pass's one write: after a fence, the echo must still
    // bring the node back (a drain to start, our record to read).
    if (change.Empty() && events.empty()) {
      if (const std::uint64_t v = RvNum(*rv); v != 0) {
        std::scoped_lock lock(written_mu_);
        condition_echo_[name] = v;
      }
    }
  }
  auto ref = events::ObjectRef::Node(name, node->meta.uid);
  for (const auto& e : events) {
    d_.recorder.Event(ref, e.type == "Warning" ? events::EventType::kWarning : events::EventType::kNormal,
                      e.reason, e.message);
  }
  if (drain_event) d_.recorder.Event(ref, drain_event->reason, drain_event->message);

  runtime::Result result;
  if (plan.stop_drain) d_.drains.Cancel(name);
  if (plan.drain && !pr.dry_run && !drain_result) {
    remediation::DrainSpec spec = ToDrainSpec(plan.drain->spec);
    if (!plan.drain->gpu_uuids.empty() && !d_.drains.Running(name)) {
      // Device-level: evict only the pods holding a fenced GPU (their claims' allocations).
      // No new pod can be allocated a tainted GPU, so the set taken at the start is complete.
      const auto& taints = written ? written->device_taints
                                   : (record ? record->device_taints
                                             : std::vector<remediation::DeviceTaintRecord>{});
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
    if (plan.starts_drain) d_.metrics.Remediation("drain", kResultSuccess);
    auto started = d_.drains.Ensure(name, spec, plan.drain->deadline);
    if (started == DrainRunner::Start::kNoCapacity) result.requeue_after = std::chrono::seconds(5);
  }
  if (plan.brake_blocked) {
    d_.metrics.Remediation(Lower(api::ActionName(verdict->action)), kResultBraked);
    result.requeue_after = kBrakeRecheck;
    if (brake.retry_at && *brake.retry_at > now) {
      result.requeue_after = std::min<Duration>(kBrakeRecheck, *brake.retry_at - now);
    }
  }
  for (const auto& p : d_.index.SetVerdicts(name, std::move(states),
                                            plan.brake_blocked ? winner->name : std::string())) {
    d_.enqueue_policy(p);
  }
  d_.metrics.SetNodeHealth(name, policy::HealthStateName(verdict->state));

  if (plan.requeue_at) {
    Duration after = std::max<Duration>(*plan.requeue_at - now, std::chrono::milliseconds(100));
    if (result.requeue_after.count() == 0 || after < result.requeue_after) result.requeue_after = after;
  }
  return result;
}

}  // namespace gg::op
