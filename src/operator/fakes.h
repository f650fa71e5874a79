// In-memory fakes of the reconcilers' interfaces, in the spirit of controller-runtime's fake
// client: FakeCluster is one small object store that serves the ClusterView reads and applies
// the NodeWriter / PolicyStatusWriter writes to the same objects (resourceVersion bumped on
// every write, a stale precondition answered with Conflict), so a test can reconcile, look at
// the world, reconcile again. FakeDrains and FakeDra stand in for the drain runner and the DRA
// API. Thread-safe enough for one reconciler worker. Test-only (header, not in the library).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/cluster_view.h"
#include "operator/dra_client.h"
#include "operator/drain_runner.h"
#include "operator/escalation_client.h"
#include "operator/node_writer.h"

namespace gg::op {

class FakeCluster final : public ClusterView, public NodeWriter, public PolicyStatusWriter {
 public:
  // --- test setup ---
  void PutNode(k8s::Node node) {
    std::scoped_lock lock(mu_);
    node.meta.resource_version = std::to_string(++rv_);
    const std::string name = node.meta.name;
    nodes_[name] = std::make_shared<const k8s::Node>(std::move(node));
  }
  void DeleteNode(const std::string& name) {
    std::scoped_lock lock(mu_);
    nodes_.erase(name);
  }
  void PutReport(const std::string& node, api::GpuNodeHealthStatus status) {
    std::scoped_lock lock(mu_);
    auto obj = std::make_shared<NodeHealthObject>();
    obj->meta.name = node;
    obj->SetStatus(status);
    reports_[node] = std::move(obj);
  }
  void PutPolicy(api::GpuHealthPolicy policy) {
    std::scoped_lock lock(mu_);
    auto obj = std::make_shared<PolicyObject>();
    obj->meta.name = policy.name;
    obj->meta.generation = 1;
    obj->policy = std::move(policy);
    policies_[obj->meta.name] = std::move(obj);
  }
  void DeletePolicy(const std::string& name) {
    std::scoped_lock lock(mu_);
    policies_.erase(name);
  }
  // Makes every later write fail with `s` (OkStatus() to heal).
  void FailWrites(Status s) {
    std::scoped_lock lock(mu_);
    fail_ = std::move(s);
  }
  // Makes every later condition (status) write fail with `s`; node writes still succeed.
  void FailConditionWrites(Status s) {
    std::scoped_lock lock(mu_);
    fail_condition_ = std::move(s);
  }
  int Writes() const {
    std::scoped_lock lock(mu_);
    return writes_;
  }
  std::optional<api::GpuHealthPolicyStatus> PolicyStatus(const std::string& name) const {
    std::scoped_lock lock(mu_);
    auto it = statuses_.find(name);
    if (it == statuses_.end()) return std::nullopt;
    return it->second;
  }

  // --- ClusterView ---
  std::shared_ptr<const k8s::Node> Node(const std::string& name) const override {
    std::scoped_lock lock(mu_);
    auto it = nodes_.find(name);
    return it == nodes_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const NodeHealthObject> Report(const std::string& node) const override {
    std::scoped_lock lock(mu_);
    auto it = reports_.find(node);
    return it == reports_.end() ? nullptr : it->second;
  }
  std::shared_ptr<const PolicyObject> Policy(const std::string& name) const override {
    std::scoped_lock lock(mu_);
    auto it = policies_.find(name);
    return it == policies_.end() ? nullptr : it->second;
  }
  std::vector<std::shared_ptr<const PolicyObject>> Policies() const override {
    std::scoped_lock lock(mu_);
    std::vector<std::shared_ptr<const PolicyObject>> out;
    for (const auto& [n, p] : policies_) out.push_back(p);
    return out;
  }

  // --- NodeWriter ---
  StatusOr<std::string> PatchNode(const std::string& name, const NodeSpecChange& c) override {
    std::scoped_lock lock(mu_);
    auto node = Writable(name, c.resource_version);
    if (!node.ok()) return node.status();
    k8s::Node& n = **node;
    if (c.taints) n.taints = *c.taints;
    if (c.unschedulable) n.unschedulable = *c.unschedulable;
    for (const auto& [k, v] : c.annotations) {
      if (v) {
        n.meta.annotations.Set(k, *v);
      } else {
        n.meta.annotations.Erase(k);
      }
    }
    return Commit(std::move(*node));
  }
  StatusOr<std::string> PatchCondition(const std::string& name,
                                       const k8s::NodeCondition& condition) override {
    std::scoped_lock lock(mu_);
    if (!fail_condition_.ok()) return fail_condition_;
    auto node = Writable(name, "");
    if (!node.ok()) return node.status();
    auto& conds = (*node)->conditions;
    conds.erase_if([&](const k8s::NodeCondition& x) { return x.type == condition.type; });
    conds.push_back(condition);
    return Commit(std::move(*node));
  }

  // --- PolicyStatusWriter ---
  Status WriteStatus(const std::string& policy, const api::GpuHealthPolicyStatus& s) override {
    std::scoped_lock lock(mu_);
    if (!fail_.ok()) return fail_;
    statuses_[policy] = s;
    if (auto it = policies_.find(policy); it != policies_.end() && it->second->policy) {
      auto obj = std::make_shared<PolicyObject>(*it->second);
      obj->policy->status = s;
      it->second = std::move(obj);
    }
    return OkStatus();
  }

 private:
  StatusOr<std::unique_ptr<k8s::Node>> Writable(const std::string& name, const std::string& rv) {
    if (!fail_.ok()) return fail_;
    auto it = nodes_.find(name);
    if (it == nodes_.end()) return NotFoundError("nodes \"" + name + "\" not found");
    if (!rv.empty() && rv != it->second->meta.resource_version) {
      return AbortedError("Conflict: the object has been modified");
    }
    return std::make_unique<k8s::Node>(*it->second);
  }
  std::string Commit(std::unique_ptr<k8s::Node> n) {
    ++writes_;
    n->meta.resource_version = std::to_string(++rv_);
    std::string rv = n->meta.resource_version;
    const std::string name = n->meta.name;
    nodes_[name] = std::shared_ptr<const k8s::Node>(std::move(n));
    return rv;
  }

  mutable std::mutex mu_;
  std::uint64_t rv_ = 100;
  int writes_ = 0;
  Status fail_;
  Status fail_condition_;
  std::map<std::string, std::shared_ptr<const k8s::Node>> nodes_;
  std::map<std::string, std::shared_ptr<const NodeHealthObject>> reports_;
  std::map<std::string, std::shared_ptr<const PolicyObject>> policies_;
  std::map<std::string, api::GpuHealthPolicyStatus> statuses_;
};

// The drain runner, without threads: a drain runs until the test finishes it.
class FakeDrains final : public DrainStarter {
 public:
  struct Drain {
    remediation::DrainJob spec;
    WallTime deadline{};
    std::optional<remediation::DrainResult> result;  // set by Finish()
  };
  Start Ensure(const std::string& node, const remediation::DrainJob& spec,
               WallTime deadline) override {
    std::scoped_lock lock(mu_);
    if (auto it = drains_.find(node); it != drains_.end()) {
      return it->second.result ? Start::kFinished : Start::kRunning;
    }
    if (static_cast<int>(drains_.size()) >= capacity) return Start::kNoCapacity;
    drains_[node] = Drain{spec, deadline, std::nullopt};
    ++started;
    return Start::kStarted;
  }
  std::optional<remediation::DrainResult> Result(const std::string& node) const override {
    std::scoped_lock lock(mu_);
    auto it = drains_.find(node);
    return it == drains_.end() ? std::nullopt : it->second.result;
  }
  void Forget(const std::string& node) override {
    std::scoped_lock lock(mu_);
    if (auto it = drains_.find(node); it != drains_.end() && it->second.result) drains_.erase(it);
  }
  bool Running(const std::string& node) const override {
    std::scoped_lock lock(mu_);
    auto it = drains_.find(node);
    return it != drains_.end() && !it->second.result;
  }
  void Cancel(const std::string& node) override {
    std::scoped_lock lock(mu_);
    if (drains_.erase(node) > 0) ++cancelled;
  }
  // Test control: the running drain of `node` ends with `r`.
  void Finish(const std::string& node, remediation::DrainResult r) {
    std::scoped_lock lock(mu_);
    drains_.at(node).result = std::move(r);
  }
  std::optional<Drain> Get(const std::string& node) const {
    std::scoped_lock lock(mu_);
    auto it = drains_.find(node);
    return it == drains_.end() ? std::nullopt : std::optional<Drain>(it->second);
  }

  int capacity = 32;
  int started = 0;
  int cancelled = 0;

 private:
  mutable std::mutex mu_;
  std::map<std::string, Drain> drains_;
};

// The DRA API: GPUs published per node, our rules, the pods holding each device.
class FakeDra final : public DraApi {
 public:
  StatusOr<DraCapabilities> Capabilities() override { return caps; }
  StatusOr<remediation::GpuDeviceMap> MapGpus(const std::string& node, const std::string&,
                                              const std::vector<std::string>& uuids) override {
    remediation::GpuDeviceMap m;
    for (const auto& u : uuids) {
      auto it = devices.find(node + "/" + u);
      if (it == devices.end()) {
        m.unmapped.push_back(u);
      } else {
        m.by_uuid[u] = it->second;
      }
    }
    return m;
  }
  StatusOr<std::string> EnsureRule(const remediation::DeviceTaintRuleSpec& spec,
                                   bool* created) override {
    std::string name = remediation::DeviceTaintRuleName(spec.device);
    bool fresh = rules.insert({name, spec.gpu_uuid}).second;
    if (created) *created = fresh;
    return name;
  }
  Status DeleteOurRule(const std::string& name, bool* skipped) override {
    if (skipped) *skipped = false;
    rules.erase(name);
    return OkStatus();
  }
  StatusOr<std::set<std::string>> PodsHolding(
      const std::string&, const std::vector<remediation::DeviceRef>& refs) override {
    std::set<std::string> out;
    for (const auto& r : refs) {
      if (auto it = holders.find(r.ToString()); it != holders.end()) out.insert(it->second);
    }
    return out;
  }

  DraCapabilities caps{"v1beta2", "v1", "v1", false, "served"};
  std::map<std::string, remediation::DeviceRef> devices;  // "<node>/<gpu uuid>" -> device
  std::map<std::string, std::string> rules;               // our rules: name -> GPU UUID
  std::map<std::string, std::string> holders;             // device (record form) -> pod UID
};

// The escalation hand-off's store: remediation objects by "namespace/name", created from a
// template the test puts (a missing template is NotFound, as from the API server).
class FakeEscalation final : public EscalationApi {
 public:
  struct Object {
    std::string api_version;
    std::string kind;
    EscalationOwner owner;
    std::string template_name;
  };
  void PutTemplate(const std::string& ns, const std::string& name) {
    std::scoped_lock lock(mu_);
    templates_.insert(ns + "/" + name);
  }
  Status Create(const api::EscalationTemplate& t, const EscalationOwner& owner) override {
    std::scoped_lock lock(mu_);
    if (!templates_.contains(t.namespace_ + "/" + t.name)) {
      return NotFoundError(t.kind + " \"" + t.name + "\" not found");
    }
    const std::string key = t.namespace_ + "/" + owner.node;
    if (objects_.contains(key)) return OkStatus();  // AlreadyExists is fine
    objects_[key] = Object{t.api_version, t.RemediationKind(), owner, t.name};
    ++creates;
    return OkStatus();
  }
  Status Delete(const remediation::EscalationRecord& r) override {
    std::scoped_lock lock(mu_);
    objects_.erase(r.namespace_ + "/" + r.name);  // NotFound is fine
    return OkStatus();
  }
  std::optional<Object> Get(const std::string& ns, const std::string& name) const {
    std::scoped_lock lock(mu_);
    auto it = objects_.find(ns + "/" + name);
    return it == objects_.end() ? std::nullopt : std::optional(it->second);
  }
  int creates = 0;

 private:
  mutable std::mutex mu_;
  std::set<std::string> templates_;
  std::map<std::string, Object> objects_;
};

}  // namespace gg::op
