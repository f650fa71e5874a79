// Node lifecycle in the simulated cluster:
// - NodeHeartbeatLoop, the kubelets' side: each Node's kubelet keeps a Lease named after the
//   node in kube-node-lease (holderIdentity = the node, leaseDurationSeconds 40, owned by the
//   Node) and renews it every 10 s (time-scaled). Annotating a node
//   sim.gpuguardian.io/heartbeat=stopped stops its renewals, as when the node loses power or
//   network; removing the annotation resumes them, and the kubelet then posts Ready again.
// - NodeLifecycleLoop, the node lifecycle controller: a node whose Lease has not been seen
//   renewed for the grace period (40 s, time-scaled) gets every condition Unknown
//   (NodeStatusUnknown); nodes get the taints their conditions and spec imply —
//   node.kubernetes.io/unreachable (Ready Unknown) or not-ready (Ready False) with effects
//   NoSchedule and NoExecute (the latter with timeAdded), unschedulable:NoSchedule while
//   cordoned, and the memory/disk/pid-pressure and network-unavailable NoSchedule taints.
//   Pods on a node that goes Unknown are marked not Ready.
// - TaintEvictionLoop, the taint eviction controller: a pod on a node with a NoExecute taint
//   it does not tolerate is deleted at once; one that tolerates all of them with
//   tolerationSeconds is deleted that long (time-scaled) after the controller saw it so.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "sim/controller_util.h"
#include "sim/controllers.h"

namespace gg::sim {

using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;
using internal::Taint;
using nlohmann::json;

namespace {

constexpr const char* kLeaseNs = "kube-node-lease";
constexpr const char* kUnreachable = "node.kubernetes.io/unreachable";
constexpr const char* kNotReady = "node.kubernetes.io/not-ready";
constexpr const char* kUnschedulable = "node.kubernetes.io/unschedulable";

std::string ConditionStatus(const json& node, const std::string& type,
                            std::string* reason = nullptr) {
  if (!node.contains("status") || !node["status"].is_object()) return "";
  const json& st = node["status"];
  if (!st.contains("conditions") || !st["conditions"].is_array()) return "";
  for (const auto& c : st["conditions"])
    if (c.is_object() && c.value("type", "") == type) {
      if (reason) *reason = c.value("reason", "");
      return c.value("status", "");
    }
  return "";
}

bool HeartbeatStopped(const json& node) {
  return node.contains("metadata") && node["metadata"].contains("annotations") &&
         node["metadata"]["annotations"].is_object() &&
         node["metadata"]["annotations"].value(kHeartbeatAnnotation, "") == "stopped";
}

std::uint64_t NameHash(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// The taints the node lifecycle controller manages, as they should be for this node.
std::vector<std::pair<std::string, std::string>> WantedTaints(const json& node) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string ready = ConditionStatus(node, "Ready");
  if (ready == "False") {
    out.emplace_back(kNotReady, "NoSchedule");
    out.emplace_back(kNotReady, "NoExecute");
  } else if (ready == "Unknown") {
    out.emplace_back(kUnreachable, "NoSchedule");
    out.emplace_back(kUnreachable, "NoExecute");
  }
  if (node.contains("spec") && node["spec"].is_object() &&
      node["spec"].value("unschedulable", false))
    out.emplace_back(kUnschedulable, "NoSchedule");
  const std::pair<const char*, const char*> by_condition[] = {
      {"MemoryPressure", "node.kubernetes.io/memory-pressure"},
      {"DiskPressure", "node.kubernetes.io/disk-pressure"},
      {"PIDPressure", "node.kubernetes.io/pid-pressure"},
      {"NetworkUnavailable", "node.kubernetes.io/network-unavailable"}};
  for (const auto& [cond, key] : by_condition)
    if (ConditionStatus(node, cond) == "True") out.emplace_back(key, "NoSchedule");
  return out;
}

bool Managed(const std::string& key) {
  return key == kNotReady || key == kUnreachable || key == kUnschedulable ||
         key == "node.kubernetes.io/memory-pressure" || key == "node.kubernetes.io/disk-pressure" ||
         key == "node.kubernetes.io/pid-pressure" ||
         key == "node.kubernetes.io/network-unavailable";
}

// The kubelets' heartbeats: per node the time of its next Lease renewal.
class NodeHeartbeat {
 public:
  NodeHeartbeat(ApiCore& core, const Controllers& ctl)
      : core_(core),
        nodes_ri_(core.registry().Find("", "v1", "nodes")),
        leases_ri_(core.registry().Find("coordination.k8s.io", "v1", "leases")),
        interval_(std::max(ctl.Scaled(kNodeLeaseRenewInterval), std::chrono::milliseconds(20))) {}

  void Run(std::stop_token stop);

 private:
  struct Beat {
    std::string uid;
    bool stopped = false;
    bool recovering = false;  // Ready is Unknown from the lifecycle controller: post Ready
    SteadyTime next{};
  };
  void Renew(const std::string& node, const Beat& b);
  void PostReady(const std::string& node);
  void OnNode(const WatchEvent& e, SteadyTime now);
  void RenewDue(std::stop_token stop, SteadyTime now);

  ApiCore& core_;
  std::shared_ptr<const ResourceInfo> nodes_ri_, leases_ri_;
  std::chrono::milliseconds interval_;
  std::map<std::string, Beat> beats_;
  std::multimap<SteadyTime, std::string> due_;
};

void NodeHeartbeat::Renew(const std::string& node, const Beat& b) {
  std::string now = internal::FormatMicroTime(core_.clock().Now());
  Target t{leases_ri_, kLeaseNs, node, ""};
  auto r =
      core_.Patch(t, "application/merge-patch+json", {{"spec", {{"renewTime", now}}}}, WriteOpts{});
  if (r.ok() || r.err->code != 404) return;
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata",
                 {{"name", node},
                  {"namespace", kLeaseNs},
                  {"ownerReferences",
                   {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", b.uid}}}}}},
                {"spec",
                 {{"holderIdentity", node},
                  {"leaseDurationSeconds", kNodeLeaseDuration.count()},
                  {"renewTime", now}}}};
  core_.Create(Target{leases_ri_, kLeaseNs, "", ""}, std::move(lease), WriteOpts{});
}

void NodeHeartbeat::PostReady(const std::string& node) {
  std::string now = core_.NowRfc3339();
  json conds = json::array();
  const std::tuple<const char*, const char*, const char*, const char*> mine[] = {
      {"MemoryPressure", "False", "KubeletHasSufficientMemory",
       "kubelet has sufficient memory available"},
      {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
      {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
      {"Ready", "True", "KubeletReady", "kubelet is posting ready status"}};
  for (const auto& [type, status, reason, message] : mine)
    conds.push_back({{"type", type},
                     {"status", status},
                     {"reason", reason},
                     {"message", message},
                     {"lastHeartbeatTime", now},
                     {"lastTransitionTime", now}});
  core_.Patch(Target{nodes_ri_, "", node, "status"}, "application/strategic-merge-patch+json",
              {{"status", {{"conditions", conds}}}}, WriteOpts{});
}

void NodeHeartbeat::OnNode(const WatchEvent& e, SteadyTime now) {
  if (e.type == EventType::kDeleted) {
    beats_.erase(e.obj->name);  // its Lease goes with it (garbage collector)
    return;
  }
  json n = json::parse(e.obj->json, nullptr, false);
  if (!n.is_object()) return;
  auto [it, added] = beats_.try_emplace(e.obj->name);
  Beat& b = it->second;
  if (b.uid != e.obj->uid) added = true;
  b.uid = e.obj->uid;
  bool was_stopped = b.stopped;
  b.stopped = HeartbeatStopped(n);
  std::string reason;
  b.recovering = ConditionStatus(n, "Ready", &reason) == "Unknown" && reason == "NodeStatusUnknown";
  if (added) {
    // A new kubelet registers its Lease at once; renewals are spread over the interval.
    if (!b.stopped) Renew(e.obj->name, b);
    auto offset = std::chrono::milliseconds(NameHash(e.obj->name) %
                                            std::max<long long>(1, interval_.count()));
    b.next = now + offset + interval_ / 2;
    due_.emplace(b.next, e.obj->name);
  } else if (was_stopped && !b.stopped) {
    b.next = now;
    due_.emplace(b.next, e.obj->name);
  }
  if (b.recovering && !b.stopped) {
    Renew(e.obj->name, b);
    PostReady(e.obj->name);
    b.recovering = false;
  }
}

void NodeHeartbeat::RenewDue(std::stop_token stop, SteadyTime now) {
  while (!due_.empty() && due_.begin()->first <= now && !stop.stop_requested()) {
    auto [when, node] = *due_.begin();
    due_.erase(due_.begin());
    auto it = beats_.find(node);
    if (it == beats_.end() || it->second.next != when) continue;  // gone or rescheduled
    Beat& b = it->second;
    if (!b.stopped) Renew(node, b);
    b.next = when + interval_;
    if (b.next < now) b.next = now + interval_;  // fell behind: do not burst
    due_.emplace(b.next, node);
  }
}

void NodeHeartbeat::Run(std::stop_token stop) {
  if (!leases_ri_) return;
  StoreWatch nodes(core_.store(), nodes_ri_->storage);
  auto ns_ri = core_.registry().Find("", "v1", "namespaces");
  core_.Create(Target{ns_ri, "", "", ""},
               {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kLeaseNs}}}},
               WriteOpts{});
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    nodes.Pop(evs, internal::kPoll);
    auto now = std::chrono::steady_clock::now();
    for (const auto& e : evs) OnNode(e, now);
    RenewDue(stop, now);
  }
}

// The node lifecycle controller: per node when its Lease was last seen renewed.
class NodeLifecycle {
 public:
  NodeLifecycle(ApiCore& core, const Controllers& ctl)
      : core_(core),
        nodes_ri_(core.registry().Find("", "v1", "nodes")),
        leases_ri_(core.registry().Find("coordination.k8s.io", "v1", "leases")),
        pods_ri_(core.registry().Find("", "v1", "pods")),
        grace_(std::max(ctl.Scaled(kNodeMonitorGracePeriod), kMinNodeMonitorGrace)),
        monitor_period_(std::clamp(ctl.Scaled(std::chrono::milliseconds(5000)),
                                   std::chrono::milliseconds(50),
                                   std::chrono::milliseconds(5000))) {}

  void Run(std::stop_token stop);

 private:
  struct Health {
    SteadyTime observed{};   // when this controller last saw the node's lease renewed
    std::string renew_time;  // the lease's renewTime then
    json node;
  };
  void SyncTaints(const std::string& name);
  void MarkUnknown(const std::string& name);
  void MarkPodsNotReady(const std::string& name, const std::string& now);
  void PopNodes(StoreWatch& nodes);
  SteadyTime PopLeases(StoreWatch* leases);
  void Monitor(SteadyTime now);

  ApiCore& core_;
  std::shared_ptr<const ResourceInfo> nodes_ri_, leases_ri_, pods_ri_;
  std::chrono::milliseconds grace_, monitor_period_;
  std::map<std::string, Health> health_;
  std::set<std::string> dirty_;
  SteadyTime last_monitor_{};
};

// The node's taints with the managed ones as its conditions and spec imply.
void NodeLifecycle::SyncTaints(const std::string& name) {
  auto it = health_.find(name);
  if (it == health_.end()) return;
  const json& node = it->second.node;
  auto wanted = WantedTaints(node);
  json taints = node.contains("spec") && node["spec"].is_object()
                    ? node["spec"].value("taints", json::array())
                    : json::array();
  json next = json::array();
  bool changed = false;
  for (const auto& t : taints) {
    std::string key = t.value("key", ""), effect = t.value("effect", "");
    if (Managed(key) &&
        std::find(wanted.begin(), wanted.end(), std::make_pair(key, effect)) == wanted.end()) {
      changed = true;
      continue;
    }
    next.push_back(t);
  }
  std::string now = core_.NowRfc3339();
  for (const auto& [key, effect] : wanted) {
    bool have = false;
    for (const auto& t : next) have |= t.value("key", "") == key && t.value("effect", "") == effect;
    if (have) continue;
    json t = {{"key", key}, {"effect", effect}};
    if (effect == "NoExecute") t["timeAdded"] = now;
    next.push_back(std::move(t));
    changed = true;
  }
  if (!changed) return;
  // With the resourceVersion this controller saw: a concurrent taint write (the operator's)
  // makes this a 409 and the next event brings the node again.
  json patch = {{"metadata", {{"resourceVersion", node["metadata"].value("resourceVersion", "")}}},
                {"spec", {{"taints", next.empty() ? json(nullptr) : next}}}};
  core_.Patch(Target{nodes_ri_, "", name, ""}, "application/merge-patch+json", patch, WriteOpts{});
}

// Every condition the kubelet posts goes Unknown (NodeStatusUnknown).
void NodeLifecycle::MarkUnknown(const std::string& name) {
  const json& node = health_[name].node;
  std::string now = core_.NowRfc3339();
  json conds = json::array();
  bool any = false;
  if (node.contains("status") && node["status"].contains("conditions") &&
      node["status"]["conditions"].is_array())
    for (auto c : node["status"]["conditions"]) {
      std::string type = c.value("type", "");
      if (type != "Ready" && type != "MemoryPressure" && type != "DiskPressure" &&
          type != "PIDPressure")
        continue;
      any |= type == "Ready";
      if (c.value("status", "") == "Unknown") continue;
      c["status"] = "Unknown";
      c["reason"] = "NodeStatusUnknown";
      c["message"] = "Kubelet stopped posting node status.";
      c["lastTransitionTime"] = now;
      conds.push_back(std::move(c));
    }
  if (!any)
    conds.push_back({{"type", "Ready"},
                     {"status", "Unknown"},
                     {"reason", "NodeStatusNeverUpdated"},
                     {"message", "Kubelet never posted node status."},
                     {"lastHeartbeatTime", nullptr},
                     {"lastTransitionTime", now}});
  if (conds.empty()) return;
  core_.Patch(Target{nodes_ri_, "", name, "status"}, "application/strategic-merge-patch+json",
              {{"status", {{"conditions", conds}}}}, WriteOpts{});
  MarkPodsNotReady(name, now);
}

// MarkPodsNotReady: the pods there can no longer be trusted to serve.
void NodeLifecycle::MarkPodsNotReady(const std::string& name, const std::string& now) {
  std::vector<std::pair<std::string, std::string>> on_node;
  {
    std::scoped_lock lock(core_.store().mu());
    core_.store().ForEachLocked(
        pods_ri_->storage, "", "", [&](const std::string&, const ObjPtr& o) {
          if (o->json.find(name) == std::string::npos) return true;  // cheap pre-filter
          json p = json::parse(o->json, nullptr, false);
          if (p.is_object() && Str(p, {"spec", "nodeName"}) == name && internal::PodReady(p))
            on_node.emplace_back(o->ns, o->name);
          return true;
        });
  }
  for (const auto& [ns, pod] : on_node)
    core_.Patch(Target{pods_ri_, ns, pod, "status"}, "application/strategic-merge-patch+json",
                {{"status",
                  {{"conditions",
                    {{{"type", "Ready"},
                      {"status", "False"},
                      {"lastProbeTime", nullptr},
                      {"lastTransitionTime", now}}}}}}},
                WriteOpts{});
}

// Node changes are what it reacts to at once.
void NodeLifecycle::PopNodes(StoreWatch& nodes) {
  std::deque<WatchEvent> evs;
  nodes.Pop(evs, internal::kPoll);
  auto now = std::chrono::steady_clock::now();
  for (const auto& e : evs) {
    if (e.type == EventType::kDeleted) {
      health_.erase(e.obj->name);
      continue;
    }
    json n = json::parse(e.obj->json, nullptr, false);
    if (!n.is_object()) continue;
    auto [it, added] = health_.try_emplace(e.obj->name);
    if (added) it->second.observed = now;  // the first sight counts as a probe
    it->second.node = std::move(n);
    dirty_.insert(e.obj->name);
  }
}

// A Lease whose renewTime changed is a probe of its node. Returns the time it was seen.
SteadyTime NodeLifecycle::PopLeases(StoreWatch* leases) {
  std::deque<WatchEvent> evs;
  if (leases) leases->Pop(evs, std::chrono::milliseconds(0));
  auto now = std::chrono::steady_clock::now();
  for (const auto& e : evs) {
    if (e.type == EventType::kDeleted || e.obj->ns != kLeaseNs) continue;
    auto it = health_.find(e.obj->name);
    if (it == health_.end()) continue;
    json l = json::parse(e.obj->json, nullptr, false);
    std::string renew = l.is_object() ? Str(l, {"spec", "renewTime"}) : "";
    if (renew != it->second.renew_time) {
      it->second.renew_time = renew;
      it->second.observed = now;
    }
  }
  return now;
}

// Nodes not probed within the grace period go Unknown.
void NodeLifecycle::Monitor(SteadyTime now) {
  if (now - last_monitor_ < monitor_period_) return;
  last_monitor_ = now;
  for (auto& [name, h] : health_) {
    if (now - h.observed <= grace_) continue;
    std::string reason;
    if (ConditionStatus(h.node, "Ready", &reason) == "Unknown") continue;
    MarkUnknown(name);
  }
}

void NodeLifecycle::Run(std::stop_token stop) {
  StoreWatch nodes(core_.store(), nodes_ri_->storage);
  std::unique_ptr<StoreWatch> leases;
  if (leases_ri_) leases = std::make_unique<StoreWatch>(core_.store(), leases_ri_->storage);
  while (!stop.stop_requested()) {
    PopNodes(nodes);
    auto now = PopLeases(leases.get());
    for (const auto& name : dirty_) SyncTaints(name);
    dirty_.clear();
    Monitor(now);
  }
}

// The taint eviction controller: per pod on a node with NoExecute taints when it must go.
class TaintEviction {
 public:
  TaintEviction(ApiCore& core, const Controllers& ctl)
      : core_(core),
        ctl_(ctl),
        nodes_ri_(core.registry().Find("", "v1", "nodes")),
        pods_ri_(core.registry().Find("", "v1", "pods")),
        nodes_(core.store(), nodes_ri_->storage),
        pods_(core.store(), pods_ri_->storage) {}

  void Run(std::stop_token stop);

 private:
  struct PodRec {
    std::string node;
    std::vector<internal::Toleration> tols;
    json pod;
  };
  void Forget(const std::string& key);
  void Evict(const std::string& key);
  void PopNodes();
  void PopPods();
  void OnPod(const std::string& key, json p);
  void Reschedule(const std::string& key, SteadyTime now);

  ApiCore& core_;
  const Controllers& ctl_;
  std::shared_ptr<const ResourceInfo> nodes_ri_, pods_ri_;
  StoreWatch nodes_, pods_;
  std::map<std::string, std::vector<Taint>> no_execute_;  // node -> its NoExecute taints
  std::map<std::string, PodRec> pod_recs_;                // pod key -> record
  std::map<std::string, std::set<std::string>> pods_on_;  // node -> pod keys
  std::map<std::string, SteadyTime> scheduled_;           // pod key -> eviction time
  std::set<std::string> dirty_;                           // pod keys to look at
};

void TaintEviction::Forget(const std::string& key) {
  auto it = pod_recs_.find(key);
  if (it != pod_recs_.end()) {
    pods_on_[it->second.node].erase(key);
    pod_recs_.erase(it);
  }
  scheduled_.erase(key);
}

void TaintEviction::Evict(const std::string& key) {
  auto it = pod_recs_.find(key);
  if (it == pod_recs_.end()) return;
  auto slash = key.find('/');
  std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
  json cond = {{"type", "DisruptionTarget"},
               {"status", "True"},
               {"reason", "DeletionByTaintManager"},
               {"message", "Taint manager: deleting due to NoExecute taint"},
               {"lastTransitionTime", core_.NowRfc3339()}};
  core_.Patch(Target{pods_ri_, ns, name, "status"}, "application/strategic-merge-patch+json",
              {{"status", {{"conditions", {cond}}}}}, WriteOpts{});
  auto r = core_.Delete(Target{pods_ri_, ns, name, ""}, json::object(), WriteOpts{});
  if (r.ok())
    internal::RecordEvent(core_, it->second.pod, "Normal", "TaintManagerEviction", "Delete",
                          "Marking for deletion Pod " + key, "taint-eviction-controller",
                          "taint-eviction-controller");
  Forget(key);
}

// A node whose NoExecute taints changed: its pods are looked at again.
void TaintEviction::PopNodes() {
  std::deque<WatchEvent> evs;
  nodes_.Pop(evs, std::chrono::milliseconds(0));
  for (const auto& e : evs) {
    std::vector<Taint> ne;
    if (e.type != EventType::kDeleted) {
      json n = json::parse(e.obj->json, nullptr, false);
      for (auto& t : internal::NodeTaints(n))
        if (t.effect == "NoExecute") ne.push_back(std::move(t));
    }
    auto& cur = no_execute_[e.obj->name];
    bool same = cur.size() == ne.size() &&
                std::equal(cur.begin(), cur.end(), ne.begin(), [](const Taint& a, const Taint& b) {
                  return a.key == b.key && a.value == b.value;
                });
    if (same) continue;
    cur = std::move(ne);
    for (const auto& k : pods_on_[e.obj->name]) dirty_.insert(k);
  }
}

void TaintEviction::PopPods() {
  std::deque<WatchEvent> evs;
  pods_.Pop(evs, internal::kPoll);
  for (const auto& e : evs) {
    std::string key = e.obj->ns + "/" + e.obj->name;
    if (e.type == EventType::kDeleted) {
      Forget(key);
      continue;
    }
    json p = json::parse(e.obj->json, nullptr, false);
    if (p.is_object()) OnPod(key, std::move(p));
  }
}

// A bound, active pod is kept with its node and tolerations; others are forgotten.
void TaintEviction::OnPod(const std::string& key, json p) {
  std::string node = Str(p, {"spec", "nodeName"});
  if (node.empty() || !internal::PodActive(p)) {
    Forget(key);
    return;
  }
  auto& r = pod_recs_[key];
  if (r.node != node) {
    pods_on_[r.node].erase(key);
    pods_on_[node].insert(key);
  }
  auto tols = internal::PodTolerations(p);
  bool changed = r.node != node || r.tols.size() != tols.size();
  r.node = node;
  r.tols = std::move(tols);
  r.pod = std::move(p);
  if (changed) dirty_.insert(key);
}

// When the pod must go: now when a NoExecute taint is not tolerated, after the shortest
// tolerationSeconds among the tolerations used, or never.
void TaintEviction::Reschedule(const std::string& key, SteadyTime now) {
  auto it = pod_recs_.find(key);
  if (it == pod_recs_.end()) return;
  const auto& taints = no_execute_[it->second.node];
  if (taints.empty()) {
    scheduled_.erase(key);
    return;
  }
  bool all = true;
  std::optional<std::int64_t> min_seconds;
  for (const auto& t : taints) {
    bool ok = false;
    for (const auto& tol : it->second.tols) {
      if (!tol.Tolerates(t)) continue;
      ok = true;
      if (tol.seconds)
        min_seconds =
            std::min(min_seconds.value_or(*tol.seconds), std::max<std::int64_t>(0, *tol.seconds));
    }
    all &= ok;
  }
  if (!all) {
    scheduled_[key] = now;
    return;
  }
  if (!min_seconds) {
    scheduled_.erase(key);
    return;
  }
  auto at = now + ctl_.Scaled(std::chrono::milliseconds(*min_seconds * 1000));
  auto s = scheduled_.find(key);
  if (s == scheduled_.end() || at < s->second) scheduled_[key] = at;
}

void TaintEviction::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    PopNodes();
    PopPods();
    auto now = std::chrono::steady_clock::now();
    for (const auto& key : dirty_) Reschedule(key, now);
    dirty_.clear();
    for (const auto& key : internal::DueKeys(scheduled_, now)) Evict(key);
  }
}

}  // namespace

void Controllers::NodeHeartbeatLoop(std::stop_token stop) { NodeHeartbeat(core_, *this).Run(stop); }

void Controllers::NodeLifecycleLoop(std::stop_token stop) { NodeLifecycle(core_, *this).Run(stop); }

void Controllers::TaintEvictionLoop(std::stop_token stop) { TaintEviction(core_, *this).Run(stop); }

}  // namespace gg::sim
