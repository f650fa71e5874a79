// PolicyReconciler: desired status from the fleet index, written when it differs.
#include "operator/policy_reconciler.h"

#include "remediation/brake.h"

namespace gg::op {
namespace {

const api::PolicyCondition* Find(const std::vector<api::PolicyCondition>& conds,
                                 std::string_view type) {
  for (const auto& c : conds) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool SameIgnoringTimes(const api::GpuHealthPolicyStatus& a, const api::GpuHealthPolicyStatus& b) {
  if (a.observed_generation != b.observed_generation || a.matched_nodes != b.matched_nodes ||
      a.healthy_nodes != b.healthy_nodes || a.unhealthy_nodes != b.unhealthy_nodes ||
      a.unknown_nodes != b.unknown_nodes || a.remediating_nodes != b.remediating_nodes ||
      a.last_brake_time.has_value() != b.last_brake_time.has_value() ||
      a.conditions.size() != b.conditions.size()) {
    return false;
  }
  for (const auto& c : a.conditions) {
    const auto* o = Find(b.conditions, c.type);
    if (!o || o->status != c.status || o->reason != c.reason || o->message != c.message ||
        o->observed_generation != c.observed_generation) {
      return false;
    }
  }
  return true;
}

}  // namespace

void SetPolicyCondition(std::vector<api::PolicyCondition>& conds, api::PolicyCondition c) {
  for (auto& old : conds) {
    if (old.type != c.type) continue;
    if (old.status == c.status) c.last_transition_time = old.last_transition_time;
    old = std::move(c);
    return;
  }
  conds.push_back(std::move(c));
}

void PolicyReconciler::DeviceLevelCondition(const api::GpuHealthPolicy& policy,
                                            const api::GpuHealthPolicyStatus& current,
                                            api::GpuHealthPolicyStatus& desired,
                                            const events::ObjectRef& ref, WallTime now,
                                            runtime::Result* result) {
  if (policy.spec.remediation.device_level != api::DeviceLevelMode::kAuto || d_.dra == nullptr) {
    std::erase_if(desired.conditions,
                  [](const api::PolicyCondition& c) { return c.type == kDeviceLevelCondition; });
    return;
  }
  auto caps = d_.dra->Capabilities();
  if (!caps.ok()) {
    // Discovery did not answer: keep the condition as it was and look again soon.
    result->requeue_after = std::chrono::seconds(30);
    return;
  }
  const std::string why = caps->WhyNot(policy.spec.remediation.device_taint_effect);
  const auto* was = Find(current.conditions, kDeviceLevelCondition);
  api::PolicyCondition c{kDeviceLevelCondition, "True", "DeviceTaintRulesServed",
                         caps->message,         now,    desired.observed_generation};
  if (!why.empty()) {
    c.status = "False";
    c.reason = "DeviceTaintRulesNotServed";
    c.message = why + "; node-level remediation is used instead";
    // Said once: on the transition, not on every pass (the set covers passes that run before
    // our own status write comes back through the informer).
    bool first;
    {
      std::scoped_lock lock(mu_);
      first = announced_.insert(policy.name).second;
    }
    if (first && (!was || was->status != "False")) {
      d_.recorder.Event(ref, events::kRemediationSkipped,
                        "device-level (DRA) remediation unavailable: " + c.message);
      d_.log.Info("device-level remediation unavailable: node-level is used",
                  {{"policy", policy.name}, {"reason", c.message}});
    }
  } else {
    std::scoped_lock lock(mu_);
    announced_.erase(policy.name);
  }
  SetPolicyCondition(desired.conditions, std::move(c));
}

void PolicyReconciler::BrakeCondition(const api::GpuHealthPolicy& policy, int64_t braked,
                                      const api::GpuHealthPolicyStatus& current,
                                      api::GpuHealthPolicyStatus& desired,
                                      const events::ObjectRef& ref, WallTime now) {
  const std::string& name = policy.name;
  const auto* was_braked = Find(current.conditions, "BrakeEngaged");
  const bool was_on = was_braked && was_braked->status == "True";
  auto cond = [&](bool on, std::string reason, std::string message) {
    SetPolicyCondition(
        desired.conditions,
        api::PolicyCondition{"BrakeEngaged", on ? "True" : "False", std::move(reason),
                             std::move(message), now, desired.observed_generation});
  };
  if (braked > 0) {
    auto decision = remediation::CheckBrake(
        policy.spec.safety, d_.index.BrakeInputFor(name, policy.spec.node_selector), now);
    std::string msg = std::to_string(braked) + " node(s) held back: " +
                      (decision.reason.empty() ? "budget exhausted" : decision.reason);
    cond(true, "BudgetExhausted", msg);
    if (!was_on) {
      desired.last_brake_time = now;
      d_.recorder.Event(ref, events::kBrakeEngaged, msg);
      d_.log.Info("brake engaged: new remediation held back", {{"policy", name}, {"reason", msg}});
    }
  } else {
    cond(false, "WithinBudget", "");
    if (was_on) {
      d_.recorder.Event(ref, events::kBrakeReleased, "back under the remediation budget");
      d_.log.Info("brake released: back under the remediation budget", {{"policy", name}});
    }
  }
  d_.metrics.brake_engaged.WithLabels({name}).Set(braked > 0 ? 1 : 0);
}

StatusOr<runtime::Result> PolicyReconciler::Reconcile(const std::string& name, std::stop_token) {
  const WallTime now = d_.clock.Now();
  runtime::Result result;
  auto obj = d_.view.Policy(name);
  if (!obj) {
    d_.metrics.brake_engaged.Remove({name});
    std::scoped_lock lock(mu_);
    written_.erase(name);
    return runtime::Result{};
  }
  const api::GpuHealthPolicyStatus current =
      obj->policy ? obj->policy->status : api::GpuHealthPolicyStatus{};
  api::GpuHealthPolicyStatus desired = current;
  desired.observed_generation = obj->meta.generation;
  auto ref = events::ObjectRef::Policy(name, obj->meta.uid);
  auto cond = [&](std::string type, bool on, std::string reason, std::string message) {
    SetPolicyCondition(
        desired.conditions,
        api::PolicyCondition{std::move(type), on ? "True" : "False", std::move(reason),
                             std::move(message), now, obj->meta.generation});
  };

  std::string why;
  const api::GpuHealthPolicy* policy = UsablePolicy(*obj, &why);
  const auto* was_invalid = Find(current.conditions, "Invalid");
  if (!policy) {
    cond("Invalid", true, "InvalidSpec", why);
    cond("Ready", false, "InvalidSpec", "no action is taken under an invalid policy");
    cond("BrakeEngaged", false, "PolicyInvalid", "");
    desired.matched_nodes = desired.healthy_nodes = desired.unhealthy_nodes = 0;
    desired.unknown_nodes = desired.remediating_nodes = 0;
    d_.metrics.brake_engaged.WithLabels({name}).Set(0);
    if (!was_invalid || was_invalid->status != "True" || was_invalid->message != why) {
      d_.recorder.Event(ref, events::kPolicyInvalid, why);
      d_.log.Info("policy invalid: no action is taken under it",
                  {{"policy", name}, {"reason", why}});
    }
  } else {
    PolicyCounts c = d_.index.CountsFor(name, policy->spec.node_selector);
    desired.matched_nodes = c.matched;
    desired.healthy_nodes = c.healthy;
    desired.unhealthy_nodes = c.unhealthy;
    desired.unknown_nodes = c.unknown;
    desired.remediating_nodes = c.remediating;
    if (was_invalid && was_invalid->status == "True") {
      d_.log.Info("policy valid again", {{"policy", name}});
    }
    cond("Invalid", false, "Valid", "");
    std::string mode = policy->spec.paused ? "Paused" : policy->spec.dry_run ? "DryRun" : "Active";
    cond("Ready", true, mode,
         policy->spec.paused ? "paused: verdicts are computed, nothing is changed"
         : policy->spec.dry_run
             ? "dry run: decisions are recorded and announced, nothing is changed"
             : "policy is active");
    BrakeCondition(*policy, c.braked, current, desired, ref, now);
    DeviceLevelCondition(*policy, current, desired, ref, now, &result);
  }

  {
    std::scoped_lock lock(mu_);
    auto it = written_.find(name);
    if (obj->policy ? SameIgnoringTimes(desired, current)
                    : (it != written_.end() && SameIgnoringTimes(desired, it->second))) {
      return result;
    }
  }
  Status s = d_.writer.WriteStatus(name, desired);
  if (!s.ok()) return s;
  std::scoped_lock lock(mu_);
  written_[name] = desired;
  return result;
}

}  // namespace gg::op
