// Simulated Deployment, ReplicaSet and DaemonSet controllers, each as the real one in
// kube-controller-manager behaves where our users can see it:
// - ReplicaSet: keeps spec.replicas active pods (creating from the template, deleting the
//   least useful surplus first: unscheduled, then pending, then not ready), and keeps status
//   (replicas, fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration).
// - Deployment: one ReplicaSet per template (named <deployment>-<pod-template-hash>), rolled
//   out by strategy — RollingUpdate within maxSurge/maxUnavailable, or Recreate — with
//   status (replicas, updated/ready/available/unavailableReplicas, observedGeneration) and the
//   Available/Progressing conditions, so `kubectl rollout status` works.
// - DaemonSet: one pod per node that should run one (node selector/affinity, taints with the
//   tolerations the controller adds), created with node affinity for that node and bound by
//   the scheduler (which checks resources); RollingUpdate replaces old pods within
//   maxUnavailable; status desired/current/ready/updated/available/misscheduled.
// Pods become Ready when the kubelet says so; available when Ready for minReadySeconds
// (divided by the time scale).
//
// The loop keeps what it created or deleted in its cache at once (the write's result), so it
// never counts the same missing pod twice while the watch catches up — what the real
// controllers do with expectations.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>

#include "sim/controller_util.h"
#include "sim/controllers.h"

namespace gg::sim {

using internal::ControllerUid;
using internal::FirstUntolerated;
using internal::SteadyTime;
using internal::Str;
using internal::Taint;
using nlohmann::json;

namespace {

using WallClock = std::chrono::system_clock;

struct PodRec {
  std::string owner;  // controller uid
  std::string node;   // spec.nodeName, or the node a DaemonSet pod's affinity names
  bool bound = false;
  bool active = false;  // not terminal, not being deleted
  bool ready = false;
  std::optional<WallClock::time_point> ready_since;
  std::string phase;
  std::string hash;                 // pod-template-hash / controller-revision-hash
  std::string template_generation;  // pod-template-generation (DaemonSet pods)
  json labels;
  std::string created;  // creationTimestamp
  std::uint64_t rv = 0;
};

struct NodeRec {
  json match;  // metadata name + labels
  std::vector<Taint> taints;
};

}  // namespace

std::string PodTemplateHash(const json& tmpl) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : tmpl.dump()) h = (h ^ c) * 1099511628211ULL;
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string hash;
  for (int i = 0; i < 10; ++i, h /= 27) hash += kAlphabet[h % 27];
  return hash;
}

namespace {

json WithoutHash(json tmpl) {
  if (tmpl.contains("metadata") && tmpl["metadata"].is_object() &&
      tmpl["metadata"].contains("labels") && tmpl["metadata"]["labels"].is_object()) {
    tmpl["metadata"]["labels"].erase("pod-template-hash");
    if (tmpl["metadata"]["labels"].empty()) tmpl["metadata"].erase("labels");
  }
  if (tmpl.contains("metadata") && tmpl["metadata"].is_object() && tmpl["metadata"].empty())
    tmpl.erase("metadata");
  return tmpl;
}

// intstr.GetScaledValueFromIntOrPercent.
long IntOrPercent(const json& v, long total, bool round_up, long dflt) {
  if (v.is_number_integer()) return v.get<long>();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (!s.empty() && s.back() == '%') {
      try {
        double pct = std::stod(s.substr(0, s.size() - 1));
        double x = pct * static_cast<double>(total) / 100.0;
        return static_cast<long>(round_up ? std::ceil(x - 1e-9) : std::floor(x + 1e-9));
      } catch (...) {
        return dflt;
      }
    }
    try {
      return std::stol(s);
    } catch (...) {
      return dflt;
    }
  }
  return dflt;
}

long Replicas(const json& o) {
  if (!o.contains("spec") || !o["spec"].is_object()) return 1;
  const json& r = o["spec"].value("replicas", json(1));
  return r.is_number_integer() ? r.get<long>() : 1;
}
long StatusInt(const json& o, const char* k) {
  if (!o.contains("status") || !o["status"].is_object()) return 0;
  const json& v = o["status"].value(k, json(0));
  return v.is_number_integer() ? v.get<long>() : 0;
}
long Generation(const json& o) { return o["metadata"].value("generation", 0L); }
long MinReadySeconds(const json& o) {
  return o.contains("spec") && o["spec"].is_object() ? o["spec"].value("minReadySeconds", 0L) : 0L;
}

// Sets (or keeps) a condition, with lastTransitionTime changed only on a status change and
// (with_update) lastUpdateTime on any change of reason or message.
void SetCondition(json& conds, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message, const std::string& now,
                  bool with_update) {
  for (auto& c : conds) {
    if (c.value("type", "") != type) continue;
    bool same = c.value("status", "") == status && c.value("reason", "") == reason &&
                c.value("message", "") == message;
    if (same) return;
    if (c.value("status", "") != status) c["lastTransitionTime"] = now;
    c["status"] = status;
    c["reason"] = reason;
    c["message"] = message;
    if (with_update) c["lastUpdateTime"] = now;
    return;
  }
  json c = {{"type", type},
            {"status", status},
            {"reason", reason},
            {"message", message},
            {"lastTransitionTime", now}};
  if (with_update) c["lastUpdateTime"] = now;
  conds.push_back(std::move(c));
}
const json* FindCondition(const json& conds, const std::string& type) {
  for (const auto& c : conds)
    if (c.value("type", "") == type) return &c;
  return nullptr;
}

// Tolerations the DaemonSet controller gives its pods (AddOrUpdateDaemonPodTolerations).
void AddDaemonTolerations(json& spec) {
  std::vector<std::pair<std::string, std::string>> add = {
      {"node.kubernetes.io/not-ready", "NoExecute"},
      {"node.kubernetes.io/unreachable", "NoExecute"},
      {"node.kubernetes.io/disk-pressure", "NoSchedule"},
      {"node.kubernetes.io/memory-pressure", "NoSchedule"},
      {"node.kubernetes.io/pid-pressure", "NoSchedule"},
      {"node.kubernetes.io/unschedulable", "NoSchedule"}};
  if (spec.value("hostNetwork", false))
    add.emplace_back("node.kubernetes.io/network-unavailable", "NoSchedule");
  if (!spec.contains("tolerations") || !spec["tolerations"].is_array())
    spec["tolerations"] = json::array();
  for (const auto& [key, effect] : add) {
    bool have = false;
    for (const auto& t : spec["tolerations"])
      if (t.is_object() && t.value("key", "") == key && t.value("effect", "") == effect &&
          t.value("operator", "") == "Exists" && !t.contains("tolerationSeconds"))
        have = true;
    if (!have)
      spec["tolerations"].push_back({{"key", key}, {"operator", "Exists"}, {"effect", effect}});
  }
}

// ReplaceDaemonSetPodNodeNameNodeAffinity: the pod may run on `node` only.
void PinToNode(json& spec, const std::string& node) {
  json field = json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}});
  json& req = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!req.is_object() || !req.contains("nodeSelectorTerms") ||
      !req["nodeSelectorTerms"].is_array() || req["nodeSelectorTerms"].empty()) {
    req = {{"nodeSelectorTerms", {{{"matchFields", field}}}}};
    return;
  }
  for (auto& term : req["nodeSelectorTerms"]) term["matchFields"] = field;
}

// The node a DaemonSet pod is for: its nodeName, or the one its node affinity pins it to.
std::string DaemonPodNode(const json& p) {
  std::string n = Str(p, {"spec", "nodeName"});
  if (!n.empty()) return n;
  const json* cur = &p;
  for (const char* k :
       {"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"}) {
    if (!cur->is_object() || !cur->contains(k)) return "";
    cur = &(*cur)[k];
  }
  if (!cur->contains("nodeSelectorTerms") || !(*cur)["nodeSelectorTerms"].is_array()) return "";
  for (const auto& term : (*cur)["nodeSelectorTerms"])
    for (const auto& f : term.value("matchFields", json::array()))
      if (f.value("key", "") == "metadata.name" && f.value("operator", "") == "In" &&
          f.contains("values") && f["values"].is_array() && f["values"].size() == 1 &&
          f["values"][0].is_string())
        return f["values"][0].get<std::string>();
  return "";
}

// Sets status field `k` to v, or drops it when v is 0 (the API omits zero counts).
void SetOpt(json& st, const char* k, long v) {
  if (v)
    st[k] = v;
  else
    st.erase(k);
}

// What one Deployment sync works from: the Deployment's spec read once, its ReplicaSets
// sorted oldest first and split into the one for the current template and the old ones.
struct DeploySync {
  std::string duid, ns, name;
  long replicas = 0;
  json spec, tmpl;
  std::string new_uid;
  std::vector<std::string> olds;
  std::vector<std::pair<std::string, std::string>> owned;  // (creationTimestamp+name, uid)
  bool deleting = false, paused = false;
  std::string strategy;
  long surge = 0, unavail = 0;
  std::string now;
  json conds;
  std::string new_name;
};

// What one DaemonSet sync works from and counts.
struct DaemonSync {
  std::string uid, hash;
  json tmpl, pod_like;
  std::vector<internal::Toleration> tols;
  long min_ready = 0;
  bool deleting = false;
  long desired = 0, current = 0, misscheduled = 0, ready = 0, updated = 0, avail = 0;
  std::vector<std::string> old_on;  // nodes whose pod runs an old template
};

// The Deployment, ReplicaSet and DaemonSet controllers: one thread, one cache of the
// objects they own and of the pods those own.
class WorkloadController {
 public:
  WorkloadController(ApiCore& core, const Controllers& ctl)
      : core_(core),
        ctl_(ctl),
        pods_ri_(core.registry().Find("", "v1", "pods")),
        nodes_ri_(core.registry().Find("", "v1", "nodes")),
        ds_ri_(core.registry().Find("apps", "v1", "daemonsets")),
        rs_ri_(core.registry().Find("apps", "v1", "replicasets")),
        deploy_ri_(core.registry().Find("apps", "v1", "deployments")),
        pods_(core.store(), pods_ri_->storage),
        nodes_(core.store(), nodes_ri_->storage),
        dss_(core.store(), ds_ri_->storage),
        rss_(core.store(), rs_ri_->storage),
        deploys_(core.store(), deploy_ri_->storage) {}

  void Run(std::stop_token stop);

 private:
  // Cache upkeep.
  void ForgetPod(const std::string& key);
  void DirtyOwner(const std::string& uid);
  void RecordPod(const std::string& key, const json& p, std::uint64_t rv);
  bool Available(const PodRec& r, long min_ready, std::string_view owner_uid);
  // Writes.
  void PatchStatus(const std::shared_ptr<const ResourceInfo>& ri, const json& obj, json status);
  void CreatePod(const json& owner, const std::string& kind, const json& tmpl_in,
                 const std::string& node, const std::string& hash_label, const std::string& hash);
  void DeletePod(const std::string& key);
  // ReplicaSet.
  void SyncReplicaSet(const std::string& uid);
  void ScaleReplicaSetPods(const std::string& uid, const json& rs);
  void UpdateReplicaSetStatus(const std::string& uid, const json& rs);
  // DaemonSet.
  void SyncDaemonSet(const std::string& uid);
  void SyncDaemonNode(DaemonSync& s, const json& ds, const std::string& node, const NodeRec& nr,
                      std::vector<std::string>& mine);
  void RollDaemonSet(DaemonSync& s, const json& ds);
  void UpdateDaemonSetStatus(const DaemonSync& s, const json& ds);
  // Deployment.
  void ScaleReplicaSet(const std::string& rs_uid, long n);
  long SpecSum(const std::vector<std::string>& us);
  void SyncDeployment(const std::string& duid);
  DeploySync ReadDeployment(const std::string& duid, const json& d);
  long NextRevision(const std::vector<std::string>& olds);
  bool CreateNewReplicaSet(DeploySync& s, const json& d);
  void RolloutRecreate(DeploySync& s);
  void ReconcileNewReplicaSet(DeploySync& s);
  void ReconcileOldReplicaSets(DeploySync& s);
  void CleanupHistory(const DeploySync& s);
  void UpdateDeploymentStatus(DeploySync& s, const json& d);
  void UpdateProgressing(DeploySync& s, bool complete);
  // Watch events into the cache.
  void PopReplicaSets();
  void PopNodes();
  void PopPods();
  void SyncDirty();

  ApiCore& core_;
  const Controllers& ctl_;
  std::shared_ptr<const ResourceInfo> pods_ri_, nodes_ri_, ds_ri_, rs_ri_, deploy_ri_;
  internal::StoreWatch pods_, nodes_, dss_, rss_, deploys_;

  std::map<std::string, json> deployments_, replicasets_, daemonsets_;  // uid -> object
  std::map<std::string, std::set<std::string>> rs_of_;    // deployment uid -> its ReplicaSets' uids
  std::map<std::string, std::string> rs_owner_;           // ReplicaSet uid -> deployment uid
  std::map<std::string, PodRec> pod_recs_;                // pod key -> record
  std::map<std::string, std::set<std::string>> pods_of_;  // owner uid -> pod keys
  std::map<std::string, NodeRec> node_recs_;
  std::set<std::string> dirty_rs_, dirty_ds_, dirty_deploy_;
  std::multimap<SteadyTime, std::string> wake_;  // owner uid to look at again then
  SteadyTime last_{};
};

void WorkloadController::ForgetPod(const std::string& key) {
  auto it = pod_recs_.find(key);
  if (it == pod_recs_.end()) return;
  pods_of_[it->second.owner].erase(key);
  pod_recs_.erase(it);
}

void WorkloadController::DirtyOwner(const std::string& uid) {
  if (replicasets_.count(uid)) {
    dirty_rs_.insert(uid);
    if (auto o = rs_owner_.find(uid); o != rs_owner_.end()) dirty_deploy_.insert(o->second);
  }
  if (daemonsets_.count(uid)) dirty_ds_.insert(uid);
}

void WorkloadController::RecordPod(const std::string& key, const json& p, std::uint64_t rv) {
  std::string owner = ControllerUid(p);
  if (owner.empty()) {
    ForgetPod(key);
    return;
  }
  auto& r = pod_recs_[key];
  if (r.rv > rv) return;  // older than what this loop already wrote
  if (!r.owner.empty() && r.owner != owner) pods_of_[r.owner].erase(key);
  r.owner = owner;
  r.rv = rv;
  r.node = DaemonPodNode(p);
  r.bound = !Str(p, {"spec", "nodeName"}).empty();
  r.active = internal::PodActive(p);
  r.phase = Str(p, {"status", "phase"});
  bool ready = internal::PodReady(p);
  if (ready) {
    auto t = internal::ParseTime(internal::ConditionTransition(p, "Ready"));
    r.ready_since = t ? *t : core_.clock().Now();
  } else {
    r.ready_since.reset();
  }
  r.ready = ready;
  r.labels = p["metadata"].value("labels", json::object());
  r.hash = r.labels.value("controller-revision-hash", r.labels.value("pod-template-hash", ""));
  r.template_generation = r.labels.value("pod-template-generation", "");
  r.created = p["metadata"].value("creationTimestamp", "");
  pods_of_[owner].insert(key);
  DirtyOwner(owner);
}

bool WorkloadController::Available(const PodRec& r, long min_ready, std::string_view owner_uid) {
  if (!r.active || !r.ready || !r.ready_since) return false;
  if (min_ready <= 0) return true;
  auto need = ctl_.Scaled(std::chrono::milliseconds(min_ready * 1000));
  auto since = core_.clock().Now() - *r.ready_since;
  if (since >= need) return true;
  wake_.emplace(std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::milliseconds>(need - since) +
                    std::chrono::milliseconds(10),
                std::string(owner_uid));
  return false;
}

void WorkloadController::PatchStatus(const std::shared_ptr<const ResourceInfo>& ri, const json& obj,
                                     json status) {
  json old = obj.value("status", json::object());
  if (old == status) return;
  for (const auto& [k, v] : old.items())
    if (!status.contains(k)) status[k] = nullptr;  // a merge patch removes only what it nulls
  core_.Patch(Target{ri, obj["metadata"].value("namespace", ""), obj["metadata"].value("name", ""),
                     "status"},
              "application/merge-patch+json", {{"status", status}}, WriteOpts{});
}

void WorkloadController::CreatePod(const json& owner, const std::string& kind, const json& tmpl_in,
                                   const std::string& node, const std::string& hash_label,
                                   const std::string& hash) {
  const json& md = owner["metadata"];
  std::string ns = md.value("namespace", ""), name = md.value("name", "");
  json tmpl = tmpl_in;
  json pmd = {{"generateName", name + "-"},
              {"namespace", ns},
              {"ownerReferences",
               {{{"apiVersion", "apps/v1"},
                 {"kind", kind},
                 {"name", name},
                 {"uid", md.value("uid", "")},
                 {"controller", true},
                 {"blockOwnerDeletion", true}}}}};
  if (tmpl.contains("metadata") && tmpl["metadata"].is_object()) {
    for (const char* k : {"labels", "annotations"})
      if (tmpl["metadata"].contains(k)) pmd[k] = tmpl["metadata"][k];
  }
  if (!hash_label.empty()) pmd["labels"][hash_label] = hash;
  if (kind == "DaemonSet")
    pmd["labels"]["pod-template-generation"] = std::to_string(Generation(owner));
  json spec = tmpl.value("spec", json::object());
  if (!node.empty()) {
    AddDaemonTolerations(spec);
    PinToNode(spec, node);
  }
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", pmd}, {"spec", spec}};
  auto r = core_.Create(Target{pods_ri_, ns, "", ""}, std::move(pod), WriteOpts{});
  if (r.ok() && r.stored) RecordPod(ns + "/" + r.stored->name, r.obj, r.stored->rv);
}

void WorkloadController::DeletePod(const std::string& key) {
  auto slash = key.find('/');
  auto r = core_.Delete(Target{pods_ri_, key.substr(0, slash), key.substr(slash + 1), ""},
                        json::object(), WriteOpts{});
  auto it = pod_recs_.find(key);
  if (it == pod_recs_.end()) return;
  if (r.ok() && r.obj.is_object() && r.obj["metadata"].contains("deletionTimestamp")) {
    it->second.active = false;
    it->second.rv = std::max(it->second.rv, core_.store().rv());
  } else {
    it->second.active = false;
    it->second.rv = core_.store().rv();  // a tombstone until its DELETED event
  }
}

// ---- ReplicaSet ----

void WorkloadController::SyncReplicaSet(const std::string& uid) {
  auto it = replicasets_.find(uid);
  if (it == replicasets_.end()) return;
  const json& rs = it->second;
  if (!rs["metadata"].contains("deletionTimestamp")) ScaleReplicaSetPods(uid, rs);
  UpdateReplicaSetStatus(uid, rs);
}

// Creates the missing pods, or deletes the surplus, least useful first.
void WorkloadController::ScaleReplicaSetPods(const std::string& uid, const json& rs) {
  long want = Replicas(rs);
  std::vector<std::string> active;
  for (const auto& k : pods_of_[uid])
    if (pod_recs_[k].active) active.push_back(k);
  long have = static_cast<long>(active.size());
  json tmpl = rs.contains("spec") ? rs["spec"].value("template", json::object()) : json::object();
  for (long i = have; i < want && i - have < 500; ++i)
    CreatePod(rs, "ReplicaSet", tmpl, "", "", "");
  if (have <= want) return;
  // Least useful first: unscheduled, pending, not ready, newest.
  std::sort(active.begin(), active.end(), [&](const std::string& a, const std::string& b) {
    const PodRec &x = pod_recs_[a], &y = pod_recs_[b];
    if (x.bound != y.bound) return !x.bound;
    bool xr = x.phase == "Running", yr = y.phase == "Running";
    if (xr != yr) return !xr;
    if (x.ready != y.ready) return !x.ready;
    return x.created > y.created;
  });
  for (long i = 0; i < have - want; ++i) DeletePod(active[i]);
}

// Status as of the pods this loop knows (including what it just created or deleted).
void WorkloadController::UpdateReplicaSetStatus(const std::string& uid, const json& rs) {
  long replicas = 0, labeled = 0, ready = 0, avail = 0;
  json tmpl_labels = rs.contains("spec") && rs["spec"].contains("template") &&
                             rs["spec"]["template"].contains("metadata")
                         ? rs["spec"]["template"]["metadata"].value("labels", json::object())
                         : json::object();
  for (const auto& k : pods_of_[uid]) {
    const PodRec& r = pod_recs_[k];
    if (!r.active) continue;
    ++replicas;
    bool all = true;
    for (const auto& [lk, lv] : tmpl_labels.items())
      all &= r.labels.contains(lk) && r.labels[lk] == lv;
    labeled += all;
    ready += r.ready;
    avail += Available(r, MinReadySeconds(rs), uid);
  }
  json st = rs.value("status", json::object());
  st["replicas"] = replicas;
  SetOpt(st, "fullyLabeledReplicas", labeled);
  SetOpt(st, "readyReplicas", ready);
  SetOpt(st, "availableReplicas", avail);
  SetOpt(st, "observedGeneration", Generation(rs));
  PatchStatus(rs_ri_, rs, st);
}

// ---- DaemonSet ----

void WorkloadController::SyncDaemonSet(const std::string& uid) {
  auto it = daemonsets_.find(uid);
  if (it == daemonsets_.end()) return;
  const json& ds = it->second;
  DaemonSync s;
  s.uid = uid;
  s.deleting = ds["metadata"].contains("deletionTimestamp");
  s.tmpl = ds.contains("spec") ? ds["spec"].value("template", json::object()) : json::object();
  s.hash = PodTemplateHash(s.tmpl);
  s.pod_like = {{"spec", s.tmpl.value("spec", json::object())}};
  AddDaemonTolerations(s.pod_like["spec"]);
  s.tols = internal::PodTolerations(s.pod_like);
  s.min_ready = MinReadySeconds(ds);
  std::map<std::string, std::vector<std::string>> by_node;  // node -> active pod keys
  for (const auto& k : pods_of_[uid]) {
    const PodRec& r = pod_recs_[k];
    if (r.active) by_node[r.node].push_back(k);
  }
  for (const auto& [node, nr] : node_recs_) SyncDaemonNode(s, ds, node, nr, by_node[node]);
  RollDaemonSet(s, ds);
  UpdateDaemonSetStatus(s, ds);
}

// One node: counts it, and creates the pod it should run or deletes the ones it should not.
void WorkloadController::SyncDaemonNode(DaemonSync& s, const json& ds, const std::string& node,
                                        const NodeRec& nr, std::vector<std::string>& mine) {
  bool selected = internal::NodeSelectorMatches(s.pod_like["spec"], nr.match);
  bool should_run = selected && !FirstUntolerated(nr.taints, s.tols, {"NoSchedule", "NoExecute"});
  bool may_continue = selected && !FirstUntolerated(nr.taints, s.tols, {"NoExecute"});
  if (should_run) ++s.desired;
  if (!mine.empty()) {
    if (!should_run) ++s.misscheduled;
    bool any_bound = false;
    for (const auto& k : mine) any_bound |= pod_recs_[k].bound;
    if (should_run && any_bound) ++s.current;
  }
  if (s.deleting) return;
  if (!may_continue) {
    for (const auto& k : mine) DeletePod(k);
    return;
  }
  if (mine.empty() && should_run) {
    CreatePod(ds, "DaemonSet", s.tmpl, node, "controller-revision-hash", s.hash);
    return;
  }
  if (mine.size() > 1) {  // keep the oldest
    std::sort(mine.begin(), mine.end(), [&](const std::string& a, const std::string& b) {
      return pod_recs_[a].created < pod_recs_[b].created;
    });
    for (std::size_t i = 1; i < mine.size(); ++i) DeletePod(mine[i]);
    mine.resize(1);
  }
  if (!mine.empty() && should_run) {
    const PodRec& r = pod_recs_[mine[0]];
    s.ready += r.ready;
    bool is_avail = Available(r, s.min_ready, s.uid);
    s.avail += is_avail;
    // Up to date: the current template's hash, or (as the real controller also accepts)
    // the DaemonSet generation the pod was made from.
    if (r.hash == s.hash || r.template_generation == std::to_string(Generation(ds)))
      ++s.updated;
    else
      s.old_on.push_back(mine[0]);
  }
}

// RollingUpdate: replaces old pods within maxUnavailable.
void WorkloadController::RollDaemonSet(DaemonSync& s, const json& ds) {
  bool rolling = true;
  json max_unavailable = 1;
  if (ds.contains("spec") && ds["spec"].contains("updateStrategy")) {
    const json& us = ds["spec"]["updateStrategy"];
    rolling = us.value("type", "RollingUpdate") == "RollingUpdate";
    if (us.contains("rollingUpdate") && us["rollingUpdate"].contains("maxUnavailable"))
      max_unavailable = us["rollingUpdate"]["maxUnavailable"];
  }
  if (s.deleting || !rolling || s.old_on.empty()) return;
  long mu = IntOrPercent(max_unavailable, s.desired, true, 1);
  if (mu < 1) mu = 1;
  long unavailable = s.desired - s.avail;
  // Old pods that are not available go first (they cost nothing), then available ones
  // while the budget allows.
  for (const auto& k : s.old_on)
    if (!Available(pod_recs_[k], s.min_ready, s.uid)) DeletePod(k);
  for (const auto& k : s.old_on) {
    if (unavailable >= mu) break;
    if (!pod_recs_[k].active) continue;
    DeletePod(k);
    ++unavailable;
  }
}

void WorkloadController::UpdateDaemonSetStatus(const DaemonSync& s, const json& ds) {
  json st = ds.value("status", json::object());
  st["desiredNumberScheduled"] = s.desired;
  st["currentNumberScheduled"] = s.current;
  st["numberMisscheduled"] = s.misscheduled;
  st["numberReady"] = s.ready;
  SetOpt(st, "updatedNumberScheduled", s.updated);
  SetOpt(st, "numberAvailable", s.avail);
  SetOpt(st, "numberUnavailable", std::max(0L, s.desired - s.avail));
  SetOpt(st, "observedGeneration", Generation(ds));
  PatchStatus(ds_ri_, ds, st);
}

// ---- Deployment ----

void WorkloadController::ScaleReplicaSet(const std::string& rs_uid, long n) {
  auto it = replicasets_.find(rs_uid);
  if (it == replicasets_.end() || Replicas(it->second) == n) return;
  const json& rs = it->second;
  auto r = core_.Patch(
      Target{rs_ri_, rs["metadata"].value("namespace", ""), rs["metadata"].value("name", ""), ""},
      "application/merge-patch+json", {{"spec", {{"replicas", n}}}}, WriteOpts{});
  if (r.ok() && r.obj.is_object()) it->second = r.obj;  // seen at once, like an assumed write
}

long WorkloadController::SpecSum(const std::vector<std::string>& us) {
  long s = 0;
  for (const auto& u : us) s += Replicas(replicasets_[u]);
  return s;
}

void WorkloadController::SyncDeployment(const std::string& duid) {
  auto dit = deployments_.find(duid);
  if (dit == deployments_.end()) return;
  const json d = dit->second;
  DeploySync s = ReadDeployment(duid, d);
  if (!s.deleting && !s.paused) {
    if (s.new_uid.empty() && !CreateNewReplicaSet(s, d)) return;
    s.new_name = replicasets_[s.new_uid]["metadata"].value("name", "");
    if (s.strategy == "Recreate") {
      RolloutRecreate(s);
    } else {
      ReconcileNewReplicaSet(s);
      ReconcileOldReplicaSets(s);
    }
    CleanupHistory(s);
  } else if (!s.new_uid.empty()) {
    s.new_name = replicasets_[s.new_uid]["metadata"].value("name", "");
  }
  UpdateDeploymentStatus(s, d);
}

DeploySync WorkloadController::ReadDeployment(const std::string& duid, const json& d) {
  DeploySync s;
  s.duid = duid;
  const json& md = d["metadata"];
  s.ns = md.value("namespace", "");
  s.name = md.value("name", "");
  s.replicas = Replicas(d);
  s.spec = d.value("spec", json::object());
  s.tmpl = s.spec.value("template", json::object());
  json tmpl_nohash = WithoutHash(s.tmpl);
  for (const auto& u : rs_of_[duid])
    if (auto it = replicasets_.find(u); it != replicasets_.end())
      s.owned.emplace_back(it->second["metadata"].value("creationTimestamp", "") +
                               it->second["metadata"].value("name", ""),
                           u);
  std::sort(s.owned.begin(), s.owned.end());
  for (const auto& [order, u] : s.owned) {
    const json& rs = replicasets_[u];
    json rt = rs.contains("spec") ? rs["spec"].value("template", json::object()) : json::object();
    if (s.new_uid.empty() && WithoutHash(rt) == tmpl_nohash)
      s.new_uid = u;
    else
      s.olds.push_back(u);
  }
  s.deleting = md.contains("deletionTimestamp");
  s.paused = s.spec.value("paused", false);
  const json& spec = s.spec;
  s.strategy =
      spec.contains("strategy") ? spec["strategy"].value("type", "RollingUpdate") : "RollingUpdate";
  json ru = spec.contains("strategy") && spec["strategy"].contains("rollingUpdate")
                ? spec["strategy"]["rollingUpdate"]
                : json::object();
  bool rolling = s.strategy == "RollingUpdate";
  s.surge = rolling ? IntOrPercent(ru.value("maxSurge", json("25%")), s.replicas, true, 1) : 0;
  s.unavail =
      rolling ? IntOrPercent(ru.value("maxUnavailable", json("25%")), s.replicas, false, 0) : 0;
  if (rolling && s.surge == 0 && s.unavail == 0) s.unavail = 1;
  s.now = core_.NowRfc3339();
  s.conds = d.contains("status") ? d["status"].value("conditions", json::array()) : json::array();
  return s;
}

// One more than the highest deployment.kubernetes.io/revision of the old ReplicaSets.
long WorkloadController::NextRevision(const std::vector<std::string>& olds) {
  long revision = 0;
  for (const auto& u : olds) {
    const json& rs = replicasets_[u];
    try {
      revision =
          std::max(revision, std::stol(rs["metadata"]
                                           .value("annotations", json::object())
                                           .value("deployment.kubernetes.io/revision", "0")));
    } catch (...) {
    }
  }
  return revision + 1;
}

// The ReplicaSet for the current template, created with as many replicas as the strategy
// allows now. False when it could not be created (e.g. the name is taken by a ReplicaSet
// not yet seen): the next pass tries again.
bool WorkloadController::CreateNewReplicaSet(DeploySync& s, const json& d) {
  long start = s.replicas;
  if (s.strategy == "Recreate") {
    start = SpecSum(s.olds) > 0 ? 0 : s.replicas;
  } else if (!s.olds.empty()) {
    long max_total = s.replicas + s.surge;
    long cur = SpecSum(s.olds);
    start = cur >= max_total ? 0 : std::min(max_total - cur, s.replicas);
  }
  std::string hash = PodTemplateHash(s.tmpl);
  json rs_tmpl = s.tmpl;
  rs_tmpl["metadata"]["labels"]["pod-template-hash"] = hash;
  json sel = s.spec.value("selector", json::object());
  sel["matchLabels"]["pod-template-hash"] = hash;
  std::string revision = std::to_string(NextRevision(s.olds));
  json rs = {{"apiVersion", "apps/v1"},
             {"kind", "ReplicaSet"},
             {"metadata",
              {{"name", s.name + "-" + hash},
               {"namespace", s.ns},
               {"labels", rs_tmpl["metadata"]["labels"]},
               {"annotations",
                {{"deployment.kubernetes.io/revision", revision},
                 {"deployment.kubernetes.io/desired-replicas", std::to_string(s.replicas)},
                 {"deployment.kubernetes.io/max-replicas", std::to_string(s.replicas + s.surge)}}},
               {"ownerReferences",
                {{{"apiVersion", "apps/v1"},
                  {"kind", "Deployment"},
                  {"name", s.name},
                  {"uid", s.duid},
                  {"controller", true},
                  {"blockOwnerDeletion", true}}}}}},
             {"spec",
              {{"replicas", start},
               {"minReadySeconds", MinReadySeconds(d)},
               {"selector", sel},
               {"template", rs_tmpl}}}};
  auto r = core_.Create(Target{rs_ri_, s.ns, "", ""}, std::move(rs), WriteOpts{});
  if (!r.ok()) return false;
  s.new_uid = r.obj["metadata"].value("uid", "");
  replicasets_[s.new_uid] = r.obj;
  rs_of_[s.duid].insert(s.new_uid);
  rs_owner_[s.new_uid] = s.duid;
  s.new_name = r.obj["metadata"].value("name", "");
  SetCondition(s.conds, "Progressing", "True", "NewReplicaSetCreated",
               "Created new replica set \"" + s.new_name + "\"", s.now, true);
  core_.Patch(Target{deploy_ri_, s.ns, s.name, ""}, "application/merge-patch+json",
              {{"metadata", {{"annotations", {{"deployment.kubernetes.io/revision", revision}}}}}},
              WriteOpts{});
  return true;
}

// Recreate: the old ReplicaSets to zero, and the new one up once no old pod runs.
void WorkloadController::RolloutRecreate(DeploySync& s) {
  bool old_running = false;
  for (const auto& u : s.olds) {
    ScaleReplicaSet(u, 0);
    for (const auto& k : pods_of_[u])
      old_running |= pod_recs_[k].active || pod_recs_[k].phase == "Running";
  }
  if (!old_running) ScaleReplicaSet(s.new_uid, s.replicas);
}

// reconcileNewReplicaSet: the new ReplicaSet up to replicas, within maxSurge.
void WorkloadController::ReconcileNewReplicaSet(DeploySync& s) {
  long new_have = Replicas(replicasets_[s.new_uid]);
  if (new_have > s.replicas) {
    ScaleReplicaSet(s.new_uid, s.replicas);
  } else if (new_have < s.replicas) {
    long max_total = s.replicas + s.surge;
    long cur = SpecSum(s.olds) + new_have;
    if (cur < max_total)
      ScaleReplicaSet(s.new_uid, std::min(new_have + (max_total - cur), s.replicas));
  }
}

// reconcileOldReplicaSets: the old ReplicaSets down, within maxUnavailable; unhealthy old
// replicas go first.
void WorkloadController::ReconcileOldReplicaSets(DeploySync& s) {
  long old_count = SpecSum(s.olds);
  if (old_count <= 0) return;
  std::vector<std::string> all = s.olds;
  all.push_back(s.new_uid);
  long all_count = SpecSum(all);
  long min_available = s.replicas - s.unavail;
  const json& nrs = replicasets_[s.new_uid];
  long new_unavailable = Replicas(nrs) - StatusInt(nrs, "availableReplicas");
  long max_down = all_count - min_available - new_unavailable;
  if (max_down <= 0) return;
  long cleaned = 0;
  for (const auto& u : s.olds) {
    if (cleaned >= max_down) break;
    long r = Replicas(replicasets_[u]);
    long unhealthy = r - StatusInt(replicasets_[u], "availableReplicas");
    if (r == 0 || unhealthy <= 0) continue;
    long down = std::min(max_down - cleaned, unhealthy);
    ScaleReplicaSet(u, r - down);
    cleaned += down;
  }
  long avail_count = 0;
  for (const auto& u : all) avail_count += StatusInt(replicasets_[u], "availableReplicas");
  long total_down = avail_count - min_available;
  for (const auto& u : s.olds) {
    if (total_down <= 0) break;
    long r = Replicas(replicasets_[u]);
    if (r == 0) continue;
    long down = std::min(r, total_down);
    ScaleReplicaSet(u, r - down);
    total_down -= down;
  }
}

// revisionHistoryLimit: drop the oldest scaled-down ReplicaSets beyond it.
void WorkloadController::CleanupHistory(const DeploySync& s) {
  long limit = s.spec.value("revisionHistoryLimit", 10L);
  std::vector<std::string> idle;
  for (const auto& u : s.olds)
    if (Replicas(replicasets_[u]) == 0 && StatusInt(replicasets_[u], "replicas") == 0)
      idle.push_back(u);
  for (long i = 0; i + limit < static_cast<long>(idle.size()); ++i) {
    const json& rs = replicasets_[idle[i]];
    core_.Delete(Target{rs_ri_, s.ns, rs["metadata"].value("name", ""), ""}, json::object(),
                 WriteOpts{});
  }
}

// Status from the ReplicaSets' status, with the Available and Progressing conditions.
void WorkloadController::UpdateDeploymentStatus(DeploySync& s, const json& d) {
  long st_replicas = 0, updated = 0, ready = 0, avail = 0, spec_total = 0;
  for (const auto& [order, u] : s.owned) {
    const json& rs = replicasets_[u];
    st_replicas += StatusInt(rs, "replicas");
    ready += StatusInt(rs, "readyReplicas");
    avail += StatusInt(rs, "availableReplicas");
    spec_total += Replicas(rs);
  }
  if (!s.new_uid.empty() && replicasets_.count(s.new_uid))
    updated = StatusInt(replicasets_[s.new_uid], "replicas");
  long min_available = s.replicas - s.unavail;
  if (avail >= min_available)
    SetCondition(s.conds, "Available", "True", "MinimumReplicasAvailable",
                 "Deployment has minimum availability.", s.now, true);
  else
    SetCondition(s.conds, "Available", "False", "MinimumReplicasUnavailable",
                 "Deployment does not have minimum availability.", s.now, true);
  if (!s.new_name.empty()) {
    bool complete = updated == s.replicas && avail == s.replicas && st_replicas == s.replicas &&
                    (!s.new_uid.empty() &&
                     StatusInt(replicasets_[s.new_uid], "availableReplicas") == s.replicas);
    UpdateProgressing(s, complete);
  }
  // Keep the conditions in the order the real controller writes them.
  std::sort(s.conds.begin(), s.conds.end(),
            [](const json& a, const json& b) { return a.value("type", "") < b.value("type", ""); });
  json st = d.value("status", json::object());
  SetOpt(st, "replicas", st_replicas);
  SetOpt(st, "updatedReplicas", updated);
  SetOpt(st, "readyReplicas", ready);
  SetOpt(st, "availableReplicas", avail);
  SetOpt(st, "unavailableReplicas", std::max(0L, spec_total - avail));
  SetOpt(st, "observedGeneration", Generation(d));
  st["conditions"] = s.conds;
  PatchStatus(deploy_ri_, d, st);
}

// Progressing: complete, still progressing, or past progressDeadlineSeconds (then it stays
// until the rollout completes or the template changes). Schedules a look at the deadline.
void WorkloadController::UpdateProgressing(DeploySync& s, bool complete) {
  const json* prog = FindCondition(s.conds, "Progressing");
  long deadline = s.spec.value("progressDeadlineSeconds", 600L);
  if (complete) {
    SetCondition(s.conds, "Progressing", "True", "NewReplicaSetAvailable",
                 "ReplicaSet \"" + s.new_name + "\" has successfully progressed.", s.now, true);
    return;
  }
  if (prog && prog->value("reason", "") == "ProgressDeadlineExceeded") return;
  std::string reason = prog ? prog->value("reason", "") : "";
  if (!prog || reason == "NewReplicaSetAvailable")
    SetCondition(s.conds, "Progressing", "True", "ReplicaSetUpdated",
                 "ReplicaSet \"" + s.new_name + "\" is progressing.", s.now, true);
  prog = FindCondition(s.conds, "Progressing");
  std::optional<WallClock::time_point> since;
  if (prog) since = internal::ParseTime(prog->value("lastUpdateTime", ""));
  auto elapsed = since ? core_.clock().Now() - *since : WallClock::duration::zero();
  auto limit = ctl_.Scaled(std::chrono::milliseconds(deadline * 1000));
  if (since && elapsed > limit) {
    SetCondition(s.conds, "Progressing", "False", "ProgressDeadlineExceeded",
                 "ReplicaSet \"" + s.new_name + "\" has timed out progressing.", s.now, true);
  } else if (since && !s.paused) {
    auto left = limit - elapsed;
    wake_.emplace(std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::milliseconds>(left) +
                      std::chrono::milliseconds(50),
                  s.duid);
  }
}

// ---- The loop ----

// One watch's events into a cache of objects by uid; each one seen is dirty.
void PopObjects(internal::StoreWatch& watch, std::map<std::string, json>& objects,
                std::set<std::string>& dirty) {
  std::deque<WatchEvent> evs;
  if (!watch.Pop(evs, std::chrono::milliseconds(0))) objects.clear();
  for (const auto& e : evs) {
    dirty.insert(e.obj->uid);
    if (e.type == EventType::kDeleted) {
      objects.erase(e.obj->uid);
      continue;
    }
    json o = json::parse(e.obj->json, nullptr, false);
    if (o.is_object()) objects[e.obj->uid] = std::move(o);
  }
}

void WorkloadController::PopReplicaSets() {
  std::deque<WatchEvent> evs;
  if (!rss_.Pop(evs, std::chrono::milliseconds(0))) replicasets_.clear();
  for (const auto& e : evs) {
    const std::string& uid = e.obj->uid;
    dirty_rs_.insert(uid);
    if (auto o = rs_owner_.find(uid); o != rs_owner_.end()) dirty_deploy_.insert(o->second);
    if (e.type == EventType::kDeleted) {
      replicasets_.erase(uid);
      if (auto o = rs_owner_.find(uid); o != rs_owner_.end()) {
        rs_of_[o->second].erase(uid);
        rs_owner_.erase(o);
      }
      continue;
    }
    json o = json::parse(e.obj->json, nullptr, false);
    if (!o.is_object()) continue;
    std::string d = ControllerUid(o);
    if (!d.empty()) {
      rs_owner_[uid] = d;
      rs_of_[d].insert(uid);
      dirty_deploy_.insert(d);
    }
    replicasets_[uid] = std::move(o);
  }
}

// Nodes: a change of labels or taints (or a restart of the watch) makes every DaemonSet dirty.
void WorkloadController::PopNodes() {
  std::deque<WatchEvent> evs;
  bool nodes_changed = !nodes_.Pop(evs, std::chrono::milliseconds(0));
  if (nodes_changed) node_recs_.clear();
  for (const auto& e : evs) {
    if (e.type == EventType::kDeleted) {
      nodes_changed |= node_recs_.erase(e.obj->name) > 0;
      continue;
    }
    json n = json::parse(e.obj->json, nullptr, false);
    if (!n.is_object()) continue;
    NodeRec nr;
    nr.match = {
        {"metadata",
         {{"name", e.obj->name}, {"labels", n["metadata"].value("labels", json::object())}}}};
    nr.taints = internal::NodeTaints(n);
    auto it = node_recs_.find(e.obj->name);
    bool same = it != node_recs_.end() && it->second.match == nr.match &&
                it->second.taints.size() == nr.taints.size() &&
                std::equal(nr.taints.begin(), nr.taints.end(), it->second.taints.begin(),
                           [](const Taint& a, const Taint& b) {
                             return a.key == b.key && a.value == b.value && a.effect == b.effect;
                           });
    if (!same) nodes_changed = true;
    node_recs_[e.obj->name] = std::move(nr);
  }
  if (nodes_changed)
    for (const auto& [uid, o] : daemonsets_) dirty_ds_.insert(uid);
}

// Pods (the loop's wait): a pod's change makes its owner dirty.
void WorkloadController::PopPods() {
  std::deque<WatchEvent> evs;
  if (!pods_.Pop(evs, internal::kPoll)) {
    pod_recs_.clear();
    pods_of_.clear();
  }
  for (const auto& e : evs) {
    std::string key = e.obj->ns + "/" + e.obj->name;
    if (e.type == EventType::kDeleted) {
      auto it = pod_recs_.find(key);
      if (it != pod_recs_.end()) {
        DirtyOwner(it->second.owner);
        ForgetPod(key);
      }
      continue;
    }
    json p = json::parse(e.obj->json, nullptr, false);
    if (p.is_object()) RecordPod(key, p, e.obj->rv);
  }
}

// Deployments first (they scale ReplicaSets), then ReplicaSets (pods), then DaemonSets.
// A ReplicaSet's own writes show up as events and make its Deployment dirty again; the next
// pass then sees the status they produced.
void WorkloadController::SyncDirty() {
  auto deploy_now = std::move(dirty_deploy_);
  dirty_deploy_.clear();
  for (const auto& u : deploy_now) SyncDeployment(u);
  auto rs_now = std::move(dirty_rs_);
  dirty_rs_.clear();
  for (const auto& u : rs_now) SyncReplicaSet(u);
  auto ds_now = std::move(dirty_ds_);
  dirty_ds_.clear();
  for (const auto& u : ds_now) SyncDaemonSet(u);
}

void WorkloadController::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    PopObjects(deploys_, deployments_, dirty_deploy_);
    PopReplicaSets();
    PopObjects(dss_, daemonsets_, dirty_ds_);
    PopNodes();
    PopPods();
    auto now = std::chrono::steady_clock::now();
    while (!wake_.empty() && wake_.begin()->first <= now) {
      std::string uid = wake_.begin()->second;
      wake_.erase(wake_.begin());
      DirtyOwner(uid);
      if (deployments_.count(uid)) dirty_deploy_.insert(uid);
    }
    if ((dirty_rs_.empty() && dirty_ds_.empty() && dirty_deploy_.empty()) ||
        now - last_ < std::chrono::milliseconds(100))
      continue;
    last_ = now;
    SyncDirty();
  }
}

}  // namespace

void Controllers::WorkloadLoop(std::stop_token stop) { WorkloadController(core_, *this).Run(stop); }

}  // namespace gg::sim
