// NodeReconciler: one pass = read the caches into one input → Assess + Plan (pure) → apply
// the NodeChange (node_apply.cc).
#include "operator/node_reconciler.h"

#include <algorithm>
#include <set>

#include "common/strings.h"
#include "policy/evaluate.h"
#include "remediation/driver_taints.h"

namespace gg::op {
namespace {

// The report for `node`: the GPUNodeHealth status, else the legacy annotation written by the
// original gpu-guardian-operator's reporter DaemonSet. NotFound: no report at all; another
// error: a report that cannot be read (→ Unknown).
StatusOr<api::GpuNodeHealthStatus> ReadReport(const ClusterView& view, const k8s::Node& node) {
  if (auto obj = view.Report(node.meta.name)) {
    if (auto s = obj->Unpacked()) return *std::move(s);
    if (!obj->decode_error.empty()) return InvalidArgumentError(obj->decode_error);
  }
  if (auto a = node.meta.annotations.Get(api::kHealthAnnotation)) {
    auto r = api::DecodeHealthAnnotation(*a);
    if (!r.ok())
      return InvalidArgumentError("annotation " + std::string(api::kHealthAnnotation) + ": " +
                                  r.status().message());
    return r;
  }
  return NotFoundError("no report");
}

remediation::NodeView ToNodeView(const k8s::Node& node) {
  remediation::NodeView v;
  v.name = node.meta.name;
  v.unschedulable = node.unschedulable;
  for (const auto& t : node.taints) v.taints.push_back({t.key, t.value, t.effect});
  if (auto a = node.meta.annotations.Get(api::kRemediationAnnotation))
    v.record_annotation = std::string(*a);
  if (const auto* c = node.FindCondition(api::kConditionType)) {
    v.gpu_condition = remediation::NodeConditionView{c->status, c->reason, c->message};
  }
  return v;
}

std::optional<remediation::DrainOutcome> ToOutcome(
    const std::optional<remediation::DrainResult>& r) {
  if (!r) return std::nullopt;
  remediation::DrainOutcome o;
  o.done = r->state == remediation::DrainState::kDone;
  o.timed_out = r->timed_out;
  o.state = remediation::DrainStateName(r->state);
  o.message = r->message;
  if (!o.done) {
    for (const auto& b : r->blocking) o.message += "; " + b;
  }
  return o;
}

}  // namespace

StatusOr<runtime::Result> NodeReconciler::Reconcile(const std::string& name, std::stop_token) {
  auto node = d_.view.Node(name);
  if (!node) {
    ForgetNode(name);
    return runtime::Result{};
  }
  if (CacheBehindOwnWrite(name, node->meta.resource_version)) {
    // The echo of our write enqueues the node; the requeue only covers a lost event.
    runtime::Result wait;
    wait.requeue_after = std::chrono::seconds(1);
    return wait;
  }
  const WallTime now = d_.clock.Now();
  std::vector<std::shared_ptr<const PolicyObject>> holders;  // keep `in.policies` alive
  const remediation::NodeInput in = ReadInput(*node, &holders);
  remediation::Assessment assessment = remediation::Assess(in, now);
  Pass pass{*node, in, assessment, {}, {}, false, now, std::nullopt};
  std::unique_lock brake_lock(brake_mu_, std::defer_lock);
  if (Status s = ReadDriverTaints(pass, assessment); !s.ok()) return s;
  if (Status s = Lookup(pass, brake_lock); !s.ok()) return s;
  remediation::NodeChange change = remediation::Plan(in, assessment, pass.lookups, now);
  return Apply(pass, change, brake_lock);
}

remediation::NodeInput NodeReconciler::ReadInput(
    const k8s::Node& node, std::vector<std::shared_ptr<const PolicyObject>>* holders) const {
  remediation::NodeInput in;
  in.node = ToNodeView(node);
  if (auto ex = node.meta.labels.Get(api::kExcludeLabel)) in.exclude_label = std::string(*ex);
  // Valid policies only: an invalid policy acts on nothing.
  for (const auto& obj : d_.view.Policies()) {
    const api::GpuHealthPolicy* p = UsablePolicy(*obj);
    if (p && SelectorMatches(p->spec.node_selector, node.meta.labels)) {
      holders->push_back(obj);
      in.policies.push_back(p);
    }
  }
  in.report = ReadReport(d_.view, node);
  if (in.report.ok() && d_.lease_renewed &&
      (in.report->heartbeat_time != WallTime{} || in.report->observed_at != WallTime{})) {
    // The agent's heartbeat renews its Lease; the report is rewritten only on change.
    if (auto renewed = d_.lease_renewed(node.meta.name);
        renewed && *renewed > in.report->heartbeat_time)
      in.report->heartbeat_time = *renewed;
  }
  for (const k8s::NodeCondition& c : node.conditions) {
    in.node_conditions.push_back({c.type, c.status, c.reason, c.last_transition_time});
  }
  in.drain = ToOutcome(d_.drains.Result(node.meta.name));
  return in;
}

Status NodeReconciler::Lookup(Pass& pass, std::unique_lock<std::mutex>& brake_lock) {
  const remediation::Assessment& a = pass.assessment;
  if (!a.verdict) return OkStatus();
  if (a.MayStartFence()) {
    // The brake: serialize any decision that may start a fence or a drain.
    brake_lock.lock();
    pass.lookups.brake = remediation::CheckBrake(
        a.policy->spec.safety, d_.index.BrakeInputFor(a.policy->name, a.policy->spec.node_selector),
        pass.now);
  }
  auto dl = DeviceLevelPossible(pass);
  if (!dl.ok()) return dl.status();
  pass.lookups.dra_devices = *dl;
  return OkStatus();
}

// A node whose report carries no Xid and whose record holds no device fence costs no request:
// NVIDIA's driver taints a device for an Xid it read from NVML, which our agent reports too.
Status NodeReconciler::ReadDriverTaints(Pass& pass, remediation::Assessment& a) {
  if (!a.verdict || !a.policy || a.excluded || a.ungoverned || d_.dra == nullptr) return OkStatus();
  const api::RemediationSpec& rem = a.policy->spec.remediation;
  if (rem.device_level != api::DeviceLevelMode::kAuto) return OkStatus();
  const bool xids = pass.in.report.ok() && !pass.in.report->xids.empty();
  if (!xids && !a.HoldsDeviceTaints() && a.GpusToFence().empty()) return OkStatus();
  auto caps = d_.dra->Capabilities();
  if (!caps.ok()) return caps.status();  // transient: requeue
  if (!caps->UsableFor(rem.device_taint_effect)) return OkStatus();
  // One LIST serves the taints and the mapping: ask for every device the report knows.
  std::vector<std::string> uuids = a.DevicesToMap();
  if (pass.in.report.ok()) {
    for (const auto& g : pass.in.report->gpus) {
      uuids.push_back(g.uuid);
      for (const auto& m : g.mig_devices) uuids.push_back(m.uuid);
    }
  }
  std::sort(uuids.begin(), uuids.end());
  uuids.erase(std::unique(uuids.begin(), uuids.end()), uuids.end());
  auto m = d_.dra->MapGpus(pass.node.meta.name, rem.device_driver, uuids);
  if (!m.ok()) return m.status();
  pass.devices = std::move(*m);
  pass.slices_listed = true;
  remediation::FoldDriverTaints(a, pass.devices.driver_taints,
                                pass.in.report.ok() ? &*pass.in.report : nullptr, pass.now);
  return OkStatus();
}

StatusOr<bool> NodeReconciler::DeviceLevelPossible(Pass& pass) {
  const api::RemediationSpec& rem = pass.assessment.policy->spec.remediation;
  if (rem.device_level != api::DeviceLevelMode::kAuto || d_.dra == nullptr) return false;
  const std::vector<std::string> need = pass.assessment.GpusToFence();
  if (need.empty() && !pass.assessment.HoldsDeviceTaints()) {
    return false;  // nothing device-level to decide: no API calls
  }
  auto caps = d_.dra->Capabilities();
  if (!caps.ok()) return caps.status();  // transient: requeue, never fence the node instead
  if (!caps->UsableFor(rem.device_taint_effect)) return false;  // announced on the policy
  if (need.empty()) return true;
  if (!pass.slices_listed) {
    auto m =
        d_.dra->MapGpus(pass.node.meta.name, rem.device_driver, pass.assessment.DevicesToMap());
    if (!m.ok()) return m.status();
    pass.devices = std::move(*m);
  }
  std::set<std::string> published;
  for (const auto& [uuid, ref] : pass.devices.by_uuid) published.insert(uuid);
  std::vector<std::string> missing;
  pass.lookups.fence_units =
      remediation::PublishedFenceUnits(pass.assessment.UnfencedUnits(), published, &missing);
  if (!missing.empty()) {
    Log(pass).Info("GPUs not published through DRA: node-level remediation",
                   {{"driver", rem.device_driver}, {"gpus", Join(missing, ",")}});
    return false;
  }
  return true;
}

const Logger& NodeReconciler::Log(Pass& pass) const {
  if (!pass.logger) {
    const remediation::Assessment& a = pass.assessment;
    if (a.verdict && a.policy) {
      pass.logger = d_.log.WithValues({{"node", pass.node.meta.name},
                                       {"policy", a.policy->name},
                                       {"rule", Join(a.verdict->MatchedRules(), ",")},
                                       {"reason", a.verdict->message}});
    } else {
      pass.logger = d_.log.WithValues({{"node", pass.node.meta.name}});
    }
  }
  return *pass.logger;
}

void NodeReconciler::ForgetNode(const std::string& name) {
  {
    std::scoped_lock lock(written_mu_);
    written_rv_.erase(name);
    condition_echo_.erase(name);
  }
  d_.drains.Cancel(name);
  d_.metrics.ForgetNode(name);
}

bool NodeReconciler::CacheBehindOwnWrite(const std::string& node, const std::string& cache_rv) {
  std::scoped_lock lock(written_mu_);
  const std::uint64_t have = k8s::ResourceVersionNumber(cache_rv);
  // An echo this pass has already seen in the cache (its event raced our bookkeeping).
  if (auto e = condition_echo_.find(node);
      e != condition_echo_.end() && (have == 0 || have >= e->second)) {
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

void NodeReconciler::NoteConditionEcho(const std::string& node, const std::string& rv) {
  if (const std::uint64_t v = k8s::ResourceVersionNumber(rv); v != 0) {
    std::scoped_lock lock(written_mu_);
    condition_echo_[node] = v;
  }
}

void NodeReconciler::NoteOwnWrite(const std::string& node, const std::string& rv) {
  const std::uint64_t v = k8s::ResourceVersionNumber(rv);
  if (v == 0) return;
  std::scoped_lock lock(written_mu_);
  auto& cur = written_rv_[node];
  cur = std::max(cur, v);
}

bool NodeReconciler::ConsumeOwnConditionEcho(const std::string& node, const std::string& rv) {
  const std::uint64_t v = k8s::ResourceVersionNumber(rv);
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

}  // namespace gg::op
