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
#include "sim/controllers.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>

#include "sim/controller_util.h"

namespace gg::sim {

using nlohmann::json;
using internal::ControllerUid;
using internal::FirstUntolerated;
using internal::kPoll;
using internal::NodeSelectorMatches;
using internal::NodeTaints;
using internal::PodActive;
using internal::PodReady;
using internal::PodTerminal;
using internal::PodTolerations;
using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;
using internal::Taint;
using internal::Toleration;

namespace {

using WallClock = std::chrono::system_clock;

struct PodRec {
  std::string owner;     // controller uid
  std::string node;      // spec.nodeName, or the node a DaemonSet pod's affinity names
  bool bound = false;
  bool active = false;   // not terminal, not being deleted
  bool ready = false;
  std::optional<WallClock::time_point> ready_since;
  std::string phase;
  std::string hash;      // pod-template-hash / controller-revision-hash
  json labels;
  std::string created;   // creationTimestamp
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
  if (tmpl.contains("metadata") && tmpl["metadata"].is_object() && tmpl["metadata"].contains("labels") &&
      tmpl["metadata"]["labels"].is_object()) {
    tmpl["metadata"]["labels"].erase("pod-template-hash");
    if (tmpl["metadata"]["labels"].empty()) tmpl["metadata"].erase("labels");
  }
  if (tmpl.contains("metadata") && tmpl["metadata"].is_object() && tmpl["metadata"].empty()) tmpl.erase("metadata");
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
void SetCondition(json& conds, const std::string& type, const std::string& status, const std::string& reason,
                  const std::string& message, const std::string& now, bool with_update) {
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
  json c = {{"type", type}, {"status", status}, {"reason", reason}, {"message", message},
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
      {"node.kubernetes.io/not-ready", "NoExecute"},       {"node.kubernetes.io/unreachable", "NoExecute"},
      {"node.kubernetes.io/disk-pressure", "NoSchedule"},  {"node.kubernetes.io/memory-pressure", "NoSchedule"},
      {"node.kubernetes.io/pid-pressure", "NoSchedule"},   {"node.kubernetes.io/unschedulable", "NoSchedule"}};
  if (spec.value("hostNetwork", false)) add.emplace_back("node.kubernetes.io/network-unavailable", "NoSchedule");
  if (!spec.contains("tolerations") || !spec["tolerations"].is_array()) spec["tolerations"] = json::array();
  for (const auto& [key, effect] : add) {
    bool have = false;
    for (const auto& t : spec["tolerations"])
      if (t.is_object() && t.value("key", "") == key && t.value("effect", "") == effect &&
          t.value("operator", "") == "Exists" && !t.contains("tolerationSeconds"))
        have = true;
    if (!have) spec["tolerations"].push_back({{"key", key}, {"operator", "Exists"}, {"effect", effect}});
  }
}

// ReplaceDaemonSetPodNodeNameNodeAffinity: the pod may run on `node` only.
void PinToNode(json& spec, const std::string& node) {
  json field = json::array({{{"key", "metadata.name"}, {"operator", "In"}, {"values", {node}}}});
  json& req = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!req.is_object() || !req.contains("nodeSelectorTerms") || !req["nodeSelectorTerms"].is_array() ||
      req["nodeSelectorTerms"].empty()) {
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
  for (const char* k : {"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"}) {
    if (!cur->is_object() || !cur->contains(k)) return "";
    cur = &(*cur)[k];
  }
  if (!cur->contains("nodeSelectorTerms") || !(*cur)["nodeSelectorTerms"].is_array()) return "";
  for (const auto& term : (*cur)["nodeSelectorTerms"])
    for (const auto& f : term.value("matchFields", json::array()))
      if (f.value("key", "") == "metadata.name" && f.value("operator", "") == "In" && f.contains("values") &&
          f["values"].is_array() && f["values"].size() == 1 && f["values"][0].is_string())
        return f["values"][0].get<std::string>();
  return "";
}

}  // namespace

void Controllers::WorkloadLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto nodes_ri = core_.registry().Find("", "v1", "nodes");
  auto ds_ri = core_.registry().Find("apps", "v1", "daemonsets");
  auto rs_ri = core_.registry().Find("apps", "v1", "replicasets");
  auto deploy_ri = core_.registry().Find("apps", "v1", "deployments");
  StoreWatch pods(core_.store(), pods_ri->storage);
  StoreWatch nodes(core_.store(), nodes_ri->storage);
  StoreWatch dss(core_.store(), ds_ri->storage);
  StoreWatch rss(core_.store(), rs_ri->storage);
  StoreWatch deploys(core_.store(), deploy_ri->storage);

  std::map<std::string, json> deployments, replicasets, daemonsets;  // uid -> object
  std::map<std::string, std::set<std::string>> rs_of;    // deployment uid -> its ReplicaSets' uids
  std::map<std::string, std::string> rs_owner;           // ReplicaSet uid -> deployment uid
  std::map<std::string, PodRec> pod_recs;                // pod key -> record
  std::map<std::string, std::set<std::string>> pods_of;  // owner uid -> pod keys
  std::map<std::string, NodeRec> node_recs;
  std::set<std::string> dirty_rs, dirty_ds, dirty_deploy;
  std::multimap<SteadyTime, std::string> wake;  // owner uid to look at again then
  SteadyTime last{};

  auto forget_pod = [&](const std::string& key) {
    auto it = pod_recs.find(key);
    if (it == pod_recs.end()) return;
    pods_of[it->second.owner].erase(key);
    pod_recs.erase(it);
  };
  auto dirty_owner = [&](const std::string& uid) {
    if (replicasets.count(uid)) {
      dirty_rs.insert(uid);
      if (auto o = rs_owner.find(uid); o != rs_owner.end()) dirty_deploy.insert(o->second);
    }
    if (daemonsets.count(uid)) dirty_ds.insert(uid);
  };
  auto record_pod = [&](const std::string& key, const json& p, std::uint64_t rv) {
    std::string owner = ControllerUid(p);
    if (owner.empty()) {
      forget_pod(key);
      return;
    }
    auto& r = pod_recs[key];
    if (r.rv > rv) return;  // older than what this loop already wrote
    if (!r.owner.empty() && r.owner != owner) pods_of[r.owner].erase(key);
    r.owner = owner;
    r.rv = rv;
    r.node = DaemonPodNode(p);
    r.bound = !Str(p, {"spec", "nodeName"}).empty();
    r.active = PodActive(p);
    r.phase = Str(p, {"status", "phase"});
    bool ready = PodReady(p);
    if (ready) {
      auto t = internal::ParseTime(internal::ConditionTransition(p, "Ready"));
      r.ready_since = t ? *t : core_.clock().Now();
    } else {
      r.ready_since.reset();
    }
    r.ready = ready;
    r.labels = p["metadata"].value("labels", json::object());
    r.hash = r.labels.value("controller-revision-hash", r.labels.value("pod-template-hash", ""));
    r.created = p["metadata"].value("creationTimestamp", "");
    pods_of[owner].insert(key);
    dirty_owner(owner);
  };
  auto available = [&](const PodRec& r, long min_ready, std::string_view owner_uid) {
    if (!r.active || !r.ready || !r.ready_since) return false;
    if (min_ready <= 0) return true;
    auto need = Scaled(std::chrono::milliseconds(min_ready * 1000));
    auto since = core_.clock().Now() - *r.ready_since;
    if (since >= need) return true;
    wake.emplace(std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::milliseconds>(need - since) +
                     std::chrono::milliseconds(10),
                 std::string(owner_uid));
    return false;
  };
  auto patch_status = [&](const std::shared_ptr<const ResourceInfo>& ri, const json& obj, json status) {
    json old = obj.value("status", json::object());
    if (old == status) return;
    for (const auto& [k, v] : old.items())
      if (!status.contains(k)) status[k] = nullptr;  // a merge patch removes only what it nulls
    core_.Patch(Target{ri, obj["metadata"].value("namespace", ""), obj["metadata"].value("name", ""), "status"},
                "application/merge-patch+json", {{"status", status}}, WriteOpts{});
  };
  auto create_pod = [&](const json& owner, const std::string& kind, const json& tmpl_in,
                        const std::string& node, const std::string& hash_label, const std::string& hash) {
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
    json spec = tmpl.value("spec", json::object());
    if (!node.empty()) {
      AddDaemonTolerations(spec);
      PinToNode(spec, node);
    }
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", pmd}, {"spec", spec}};
    auto r = core_.Create(Target{pods_ri, ns, "", ""}, std::move(pod), WriteOpts{});
    if (r.ok() && r.stored) record_pod(ns + "/" + r.stored->name, r.obj, r.stored->rv);
  };
  auto delete_pod = [&](const std::string& key) {
    auto slash = key.find('/');
    auto r = core_.Delete(Target{pods_ri, key.substr(0, slash), key.substr(slash + 1), ""}, json::object(),
                          WriteOpts{});
    auto it = pod_recs.find(key);
    if (it == pod_recs.end()) return;
    if (r.ok() && r.obj.is_object() && r.obj["metadata"].contains("deletionTimestamp")) {
      it->second.active = false;
      it->second.rv = std::max(it->second.rv, core_.store().rv());
    } else {
      it->second.active = false;
      it->second.rv = core_.store().rv();  // a tombstone until its DELETED event
    }
  };

  // ---- ReplicaSet ----
  auto sync_rs = [&](const std::string& uid) {
    auto it = replicasets.find(uid);
    if (it == replicasets.end()) return;
    const json& rs = it->second;
    bool deleting = rs["metadata"].contains("deletionTimestamp");
    long want = Replicas(rs);
    std::vector<std::string> active;
    for (const auto& k : pods_of[uid])
      if (pod_recs[k].active) active.push_back(k);
    long have = static_cast<long>(active.size());
    if (!deleting) {
      json tmpl = rs.contains("spec") ? rs["spec"].value("template", json::object()) : json::object();
      for (long i = have; i < want && i - have < 500; ++i) create_pod(rs, "ReplicaSet", tmpl, "", "", "");
      if (have > want) {
        // Least useful first: unscheduled, pending, not ready, newest.
        std::sort(active.begin(), active.end(), [&](const std::string& a, const std::string& b) {
          const PodRec &x = pod_recs[a], &y = pod_recs[b];
          if (x.bound != y.bound) return !x.bound;
          bool xr = x.phase == "Running", yr = y.phase == "Running";
          if (xr != yr) return !xr;
          if (x.ready != y.ready) return !x.ready;
          return x.created > y.created;
        });
        for (long i = 0; i < have - want; ++i) delete_pod(active[i]);
      }
    }
    // Status as of the pods this loop knows (including what it just created or deleted).
    long replicas = 0, labeled = 0, ready = 0, avail = 0;
    json tmpl_labels = rs.contains("spec") && rs["spec"].contains("template") &&
                               rs["spec"]["template"].contains("metadata")
                           ? rs["spec"]["template"]["metadata"].value("labels", json::object())
                           : json::object();
    for (const auto& k : pods_of[uid]) {
      const PodRec& r = pod_recs[k];
      if (!r.active) continue;
      ++replicas;
      bool all = true;
      for (const auto& [lk, lv] : tmpl_labels.items()) all &= r.labels.contains(lk) && r.labels[lk] == lv;
      labeled += all;
      ready += r.ready;
      avail += available(r, MinReadySeconds(rs), uid);
    }
    json st = rs.value("status", json::object());
    st["replicas"] = replicas;
    auto set_opt = [&](const char* k, long v) {
      if (v) st[k] = v;
      else st.erase(k);
    };
    set_opt("fullyLabeledReplicas", labeled);
    set_opt("readyReplicas", ready);
    set_opt("availableReplicas", avail);
    set_opt("observedGeneration", Generation(rs));
    patch_status(rs_ri, rs, st);
  };

  // ---- DaemonSet ----
  auto sync_ds = [&](const std::string& uid) {
    auto it = daemonsets.find(uid);
    if (it == daemonsets.end()) return;
    const json& ds = it->second;
    bool deleting = ds["metadata"].contains("deletionTimestamp");
    json tmpl = ds.contains("spec") ? ds["spec"].value("template", json::object()) : json::object();
    std::string hash = PodTemplateHash(tmpl);
    json pod_like = {{"spec", tmpl.value("spec", json::object())}};
    AddDaemonTolerations(pod_like["spec"]);
    std::vector<Toleration> tols = PodTolerations(pod_like);
    long min_ready = MinReadySeconds(ds);
    std::map<std::string, std::vector<std::string>> by_node;  // node -> active pod keys
    for (const auto& k : pods_of[uid]) {
      const PodRec& r = pod_recs[k];
      if (r.active) by_node[r.node].push_back(k);
    }
    long desired = 0, current = 0, misscheduled = 0, ready = 0, updated = 0, avail = 0;
    bool rolling = true;
    json max_unavailable = 1;
    if (ds.contains("spec") && ds["spec"].contains("updateStrategy")) {
      const json& us = ds["spec"]["updateStrategy"];
      rolling = us.value("type", "RollingUpdate") == "RollingUpdate";
      if (us.contains("rollingUpdate") && us["rollingUpdate"].contains("maxUnavailable"))
        max_unavailable = us["rollingUpdate"]["maxUnavailable"];
    }
    std::vector<std::string> old_on;  // nodes whose pod runs an old template
    for (const auto& [node, nr] : node_recs) {
      bool selected = NodeSelectorMatches(pod_like["spec"], nr.match);
      bool should_run = selected && !FirstUntolerated(nr.taints, tols, {"NoSchedule", "NoExecute"});
      bool may_continue = selected && !FirstUntolerated(nr.taints, tols, {"NoExecute"});
      auto& mine = by_node[node];
      if (should_run) ++desired;
      if (!mine.empty()) {
        if (!should_run) ++misscheduled;
        bool any_bound = false;
        for (const auto& k : mine) any_bound |= pod_recs[k].bound;
        if (should_run && any_bound) ++current;
      }
      if (deleting) continue;
      if (!may_continue) {
        for (const auto& k : mine) delete_pod(k);
        continue;
      }
      if (mine.empty() && should_run) {
        create_pod(ds, "DaemonSet", tmpl, node, "controller-revision-hash", hash);
        continue;
      }
      if (mine.size() > 1) {  // keep the oldest
        std::sort(mine.begin(), mine.end(),
                  [&](const std::string& a, const std::string& b) { return pod_recs[a].created < pod_recs[b].created; });
        for (std::size_t i = 1; i < mine.size(); ++i) delete_pod(mine[i]);
        mine.resize(1);
      }
      if (!mine.empty() && should_run) {
        const PodRec& r = pod_recs[mine[0]];
        ready += r.ready;
        bool is_avail = available(r, min_ready, uid);
        avail += is_avail;
        if (r.hash == hash) ++updated;
        else old_on.push_back(mine[0]);
      }
    }
    if (!deleting && rolling && !old_on.empty()) {
      long mu = IntOrPercent(max_unavailable, desired, true, 1);
      if (mu < 1) mu = 1;
      long unavailable = desired - avail;
      // Old pods that are not available go first (they cost nothing), then available ones
      // while the budget allows.
      for (const auto& k : old_on)
        if (!available(pod_recs[k], min_ready, uid)) delete_pod(k);
      for (const auto& k : old_on) {
        if (unavailable >= mu) break;
        if (!pod_recs[k].active) continue;
        delete_pod(k);
        ++unavailable;
      }
    }
    json st = ds.value("status", json::object());
    st["desiredNumberScheduled"] = desired;
    st["currentNumberScheduled"] = current;
    st["numberMisscheduled"] = misscheduled;
    st["numberReady"] = ready;
    auto set_opt = [&](const char* k, long v) {
      if (v) st[k] = v;
      else st.erase(k);
    };
    set_opt("updatedNumberScheduled", updated);
    set_opt("numberAvailable", avail);
    set_opt("numberUnavailable", std::max(0L, desired - avail));
    set_opt("observedGeneration", Generation(ds));
    patch_status(ds_ri, ds, st);
  };

  // ---- Deployment ----
  auto scale_rs = [&](const std::string& rs_uid, long n) {
    auto it = replicasets.find(rs_uid);
    if (it == replicasets.end() || Replicas(it->second) == n) return;
    const json& rs = it->second;
    auto r = core_.Patch(Target{rs_ri, rs["metadata"].value("namespace", ""), rs["metadata"].value("name", ""), ""},
                         "application/merge-patch+json", {{"spec", {{"replicas", n}}}}, WriteOpts{});
    if (r.ok() && r.obj.is_object()) it->second = r.obj;  // seen at once, like an assumed write
  };
  auto sync_deploy = [&](const std::string& duid) {
    auto dit = deployments.find(duid);
    if (dit == deployments.end()) return;
    const json d = dit->second;
    const json& md = d["metadata"];
    std::string ns = md.value("namespace", ""), name = md.value("name", "");
    long replicas = Replicas(d);
    json spec = d.value("spec", json::object());
    json tmpl = spec.value("template", json::object());
    json tmpl_nohash = WithoutHash(tmpl);
    std::string new_uid;
    std::vector<std::string> olds;
    std::vector<std::pair<std::string, std::string>> owned;  // (creationTimestamp+name, uid)
    for (const auto& u : rs_of[duid])
      if (auto it = replicasets.find(u); it != replicasets.end())
        owned.emplace_back(it->second["metadata"].value("creationTimestamp", "") +
                               it->second["metadata"].value("name", ""),
                           u);
    std::sort(owned.begin(), owned.end());
    for (const auto& [order, u] : owned) {
      const json& rs = replicasets[u];
      json rt = rs.contains("spec") ? rs["spec"].value("template", json::object()) : json::object();
      if (new_uid.empty() && WithoutHash(rt) == tmpl_nohash) new_uid = u;
      else olds.push_back(u);
    }
    bool deleting = md.contains("deletionTimestamp");
    bool paused = spec.value("paused", false);
    std::string strategy = spec.contains("strategy") ? spec["strategy"].value("type", "RollingUpdate") : "RollingUpdate";
    json ru = spec.contains("strategy") && spec["strategy"].contains("rollingUpdate") ? spec["strategy"]["rollingUpdate"]
                                                                                     : json::object();
    long surge = strategy == "RollingUpdate" ? IntOrPercent(ru.value("maxSurge", json("25%")), replicas, true, 1) : 0;
    long unavail = strategy == "RollingUpdate" ? IntOrPercent(ru.value("maxUnavailable", json("25%")), replicas, false, 0) : 0;
    if (strategy == "RollingUpdate" && surge == 0 && unavail == 0) unavail = 1;
    auto spec_sum = [&](const std::vector<std::string>& us) {
      long s = 0;
      for (const auto& u : us) s += Replicas(replicasets[u]);
      return s;
    };
    std::string now = core_.NowRfc3339();
    json conds = d.contains("status") ? d["status"].value("conditions", json::array()) : json::array();
    std::string new_name;
    if (!deleting && !paused) {
      if (new_uid.empty()) {
        long start = replicas;
        if (strategy == "Recreate") {
          start = spec_sum(olds) > 0 ? 0 : replicas;
        } else if (!olds.empty()) {
          long max_total = replicas + surge;
          long cur = spec_sum(olds);
          start = cur >= max_total ? 0 : std::min(max_total - cur, replicas);
        }
        std::string hash = PodTemplateHash(tmpl);
        json rs_tmpl = tmpl;
        rs_tmpl["metadata"]["labels"]["pod-template-hash"] = hash;
        json sel = spec.value("selector", json::object());
        sel["matchLabels"]["pod-template-hash"] = hash;
        long revision = 0;
        for (const auto& u : olds) {
          const json& rs = replicasets[u];
          try {
            revision = std::max(revision, std::stol(rs["metadata"].value("annotations", json::object())
                                                        .value("deployment.kubernetes.io/revision", "0")));
          } catch (...) {
          }
        }
        json rs = {{"apiVersion", "apps/v1"},
                   {"kind", "ReplicaSet"},
                   {"metadata",
                    {{"name", name + "-" + hash},
                     {"namespace", ns},
                     {"labels", rs_tmpl["metadata"]["labels"]},
                     {"annotations", {{"deployment.kubernetes.io/revision", std::to_string(revision + 1)},
                                      {"deployment.kubernetes.io/desired-replicas", std::to_string(replicas)},
                                      {"deployment.kubernetes.io/max-replicas", std::to_string(replicas + surge)}}},
                     {"ownerReferences",
                      {{{"apiVersion", "apps/v1"},
                        {"kind", "Deployment"},
                        {"name", name},
                        {"uid", duid},
                        {"controller", true},
                        {"blockOwnerDeletion", true}}}}}},
                   {"spec", {{"replicas", start}, {"minReadySeconds", MinReadySeconds(d)}, {"selector", sel},
                             {"template", rs_tmpl}}}};
        auto r = core_.Create(Target{rs_ri, ns, "", ""}, std::move(rs), WriteOpts{});
        if (!r.ok()) return;  // e.g. the name is taken by a ReplicaSet not yet seen: next pass
        new_uid = r.obj["metadata"].value("uid", "");
        replicasets[new_uid] = r.obj;
        rs_of[duid].insert(new_uid);
        rs_owner[new_uid] = duid;
        new_name = r.obj["metadata"].value("name", "");
        SetCondition(conds, "Progressing", "True", "NewReplicaSetCreated",
                     "Created new replica set \"" + new_name + "\"", now, true);
        core_.Patch(Target{deploy_ri, ns, name, ""}, "application/merge-patch+json",
                    {{"metadata", {{"annotations", {{"deployment.kubernetes.io/revision", std::to_string(revision + 1)}}}}}},
                    WriteOpts{});
      }
      new_name = replicasets[new_uid]["metadata"].value("name", "");
      long new_have = Replicas(replicasets[new_uid]);
      if (strategy == "Recreate") {
        bool old_running = false;
        for (const auto& u : olds) {
          scale_rs(u, 0);
          for (const auto& k : pods_of[u]) old_running |= pod_recs[k].active || pod_recs[k].phase == "Running";
        }
        if (!old_running) scale_rs(new_uid, replicas);
      } else {
        // reconcileNewReplicaSet
        if (new_have > replicas) {
          scale_rs(new_uid, replicas);
        } else if (new_have < replicas) {
          long max_total = replicas + surge;
          long cur = spec_sum(olds) + new_have;
          if (cur < max_total) scale_rs(new_uid, std::min(new_have + (max_total - cur), replicas));
        }
        // reconcileOldReplicaSets
        long old_count = spec_sum(olds);
        if (old_count > 0) {
          std::vector<std::string> all = olds;
          all.push_back(new_uid);
          long all_count = spec_sum(all);
          long min_available = replicas - unavail;
          const json& nrs = replicasets[new_uid];
          long new_unavailable = Replicas(nrs) - StatusInt(nrs, "availableReplicas");
          long max_down = all_count - min_available - new_unavailable;
          if (max_down > 0) {
            // Unhealthy old replicas go first.
            long cleaned = 0;
            for (const auto& u : olds) {
              if (cleaned >= max_down) break;
              long r = Replicas(replicasets[u]);
              long unhealthy = r - StatusInt(replicasets[u], "availableReplicas");
              if (r == 0 || unhealthy <= 0) continue;
              long down = std::min(max_down - cleaned, unhealthy);
              scale_rs(u, r - down);
              cleaned += down;
            }
            long avail_count = 0;
            for (const auto& u : all) avail_count += StatusInt(replicasets[u], "availableReplicas");
            long total_down = avail_count - min_available;
            for (const auto& u : olds) {
              if (total_down <= 0) break;
              long r = Replicas(replicasets[u]);
              if (r == 0) continue;
              long down = std::min(r, total_down);
              scale_rs(u, r - down);
              total_down -= down;
            }
          }
        }
      }
      // revisionHistoryLimit: drop the oldest scaled-down ReplicaSets beyond it.
      long limit = spec.value("revisionHistoryLimit", 10L);
      std::vector<std::string> idle;
      for (const auto& u : olds)
        if (Replicas(replicasets[u]) == 0 && StatusInt(replicasets[u], "replicas") == 0) idle.push_back(u);
      for (long i = 0; i + limit < static_cast<long>(idle.size()); ++i) {
        const json& rs = replicasets[idle[i]];
        core_.Delete(Target{rs_ri, ns, rs["metadata"].value("name", ""), ""}, json::object(), WriteOpts{});
      }
    } else if (!new_uid.empty()) {
      new_name = replicasets[new_uid]["metadata"].value("name", "");
    }
    // Status from the ReplicaSets' status.
    long st_replicas = 0, updated = 0, ready = 0, avail = 0, spec_total = 0;
    for (const auto& [order, u] : owned) {
      const json& rs = replicasets[u];
      st_replicas += StatusInt(rs, "replicas");
      ready += StatusInt(rs, "readyReplicas");
      avail += StatusInt(rs, "availableReplicas");
      spec_total += Replicas(rs);
    }
    if (!new_uid.empty() && replicasets.count(new_uid)) updated = StatusInt(replicasets[new_uid], "replicas");
    long min_available = replicas - unavail;
    if (avail >= min_available)
      SetCondition(conds, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.",
                   now, true);
    else
      SetCondition(conds, "Available", "False", "MinimumReplicasUnavailable",
                   "Deployment does not have minimum availability.", now, true);
    if (!new_name.empty()) {
      bool complete = updated == replicas && avail == replicas && st_replicas == replicas &&
                      (!new_uid.empty() && StatusInt(replicasets[new_uid], "availableReplicas") == replicas);
      const json* prog = FindCondition(conds, "Progressing");
      long deadline = spec.value("progressDeadlineSeconds", 600L);
      if (complete) {
        SetCondition(conds, "Progressing", "True", "NewReplicaSetAvailable",
                     "ReplicaSet \"" + new_name + "\" has successfully progressed.", now, true);
      } else if (prog && prog->value("reason", "") == "ProgressDeadlineExceeded") {
        // stays until the rollout completes or the template changes
      } else {
        std::string reason = prog ? prog->value("reason", "") : "";
        if (!prog || reason == "NewReplicaSetAvailable")
          SetCondition(conds, "Progressing", "True", "ReplicaSetUpdated",
                       "ReplicaSet \"" + new_name + "\" is progressing.", now, true);
        prog = FindCondition(conds, "Progressing");
        std::optional<WallClock::time_point> since;
        if (prog) since = internal::ParseTime(prog->value("lastUpdateTime", ""));
        auto elapsed = since ? core_.clock().Now() - *since : WallClock::duration::zero();
        auto limit = Scaled(std::chrono::milliseconds(deadline * 1000));
        if (since && elapsed > limit) {
          SetCondition(conds, "Progressing", "False", "ProgressDeadlineExceeded",
                       "ReplicaSet \"" + new_name + "\" has timed out progressing.", now, true);
        } else if (since && !paused) {
          auto left = limit - elapsed;
          wake.emplace(std::chrono::steady_clock::now() +
                           std::chrono::duration_cast<std::chrono::milliseconds>(left) + std::chrono::milliseconds(50),
                       duid);
        }
      }
    }
    // Keep the conditions in the order the real controller writes them.
    std::sort(conds.begin(), conds.end(), [](const json& a, const json& b) {
      return a.value("type", "") < b.value("type", "");
    });
    json st = d.value("status", json::object());
    auto set_opt = [&](const char* k, long v) {
      if (v) st[k] = v;
      else st.erase(k);
    };
    set_opt("replicas", st_replicas);
    set_opt("updatedReplicas", updated);
    set_opt("readyReplicas", ready);
    set_opt("availableReplicas", avail);
    set_opt("unavailableReplicas", std::max(0L, spec_total - avail));
    set_opt("observedGeneration", Generation(d));
    st["conditions"] = conds;
    patch_status(deploy_ri, d, st);
  };

  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    bool fresh = deploys.Pop(evs, std::chrono::milliseconds(0));
    if (!fresh) deployments.clear();
    for (const auto& e : evs) {
      dirty_deploy.insert(e.obj->uid);
      if (e.type == EventType::kDeleted) {
        deployments.erase(e.obj->uid);
        continue;
      }
      json o = json::parse(e.obj->json, nullptr, false);
      if (o.is_object()) deployments[e.obj->uid] = std::move(o);
    }
    evs.clear();
    if (!rss.Pop(evs, std::chrono::milliseconds(0))) replicasets.clear();
    for (const auto& e : evs) {
      const std::string& uid = e.obj->uid;
      dirty_rs.insert(uid);
      if (auto o = rs_owner.find(uid); o != rs_owner.end()) dirty_deploy.insert(o->second);
      if (e.type == EventType::kDeleted) {
        replicasets.erase(uid);
        if (auto o = rs_owner.find(uid); o != rs_owner.end()) {
          rs_of[o->second].erase(uid);
          rs_owner.erase(o);
        }
        continue;
      }
      json o = json::parse(e.obj->json, nullptr, false);
      if (!o.is_object()) continue;
      std::string d = ControllerUid(o);
      if (!d.empty()) {
        rs_owner[uid] = d;
        rs_of[d].insert(uid);
        dirty_deploy.insert(d);
      }
      replicasets[uid] = std::move(o);
    }
    evs.clear();
    if (!dss.Pop(evs, std::chrono::milliseconds(0))) daemonsets.clear();
    for (const auto& e : evs) {
      dirty_ds.insert(e.obj->uid);
      if (e.type == EventType::kDeleted) {
        daemonsets.erase(e.obj->uid);
        continue;
      }
      json o = json::parse(e.obj->json, nullptr, false);
      if (o.is_object()) daemonsets[e.obj->uid] = std::move(o);
    }
    evs.clear();
    bool nodes_changed = !nodes.Pop(evs, std::chrono::milliseconds(0));
    if (nodes_changed) node_recs.clear();
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) {
        nodes_changed |= node_recs.erase(e.obj->name) > 0;
        continue;
      }
      json n = json::parse(e.obj->json, nullptr, false);
      if (!n.is_object()) continue;
      NodeRec nr;
      nr.match = {{"metadata", {{"name", e.obj->name}, {"labels", n["metadata"].value("labels", json::object())}}}};
      nr.taints = NodeTaints(n);
      auto it = node_recs.find(e.obj->name);
      bool same = it != node_recs.end() && it->second.match == nr.match && it->second.taints.size() == nr.taints.size() &&
                  std::equal(nr.taints.begin(), nr.taints.end(), it->second.taints.begin(), [](const Taint& a, const Taint& b) {
                    return a.key == b.key && a.value == b.value && a.effect == b.effect;
                  });
      if (!same) nodes_changed = true;
      node_recs[e.obj->name] = std::move(nr);
    }
    if (nodes_changed)
      for (const auto& [uid, o] : daemonsets) dirty_ds.insert(uid);
    evs.clear();
    if (!pods.Pop(evs, kPoll)) {
      pod_recs.clear();
      pods_of.clear();
    }
    for (const auto& e : evs) {
      std::string key = e.obj->ns + "/" + e.obj->name;
      if (e.type == EventType::kDeleted) {
        auto it = pod_recs.find(key);
        if (it != pod_recs.end()) {
          dirty_owner(it->second.owner);
          forget_pod(key);
        }
        continue;
      }
      json p = json::parse(e.obj->json, nullptr, false);
      if (p.is_object()) record_pod(key, p, e.obj->rv);
    }
    auto now = std::chrono::steady_clock::now();
    while (!wake.empty() && wake.begin()->first <= now) {
      std::string uid = wake.begin()->second;
      wake.erase(wake.begin());
      dirty_owner(uid);
      if (deployments.count(uid)) dirty_deploy.insert(uid);
    }
    if ((dirty_rs.empty() && dirty_ds.empty() && dirty_deploy.empty()) || now - last < std::chrono::milliseconds(100))
      continue;
    last = now;
    // Deployments first (they scale ReplicaSets), then ReplicaSets (pods), then DaemonSets.
    auto ds_now = std::move(dirty_deploy);
    dirty_deploy.clear();
    for (const auto& u : ds_now) sync_deploy(u);
    auto rs_now = std::move(dirty_rs);
    dirty_rs.clear();
    for (const auto& u : rs_now) sync_rs(u);
    auto dsn = std::move(dirty_ds);
    dirty_ds.clear();
    for (const auto& u : dsn) sync_ds(u);
    // A ReplicaSet's own writes show up as events and make its Deployment dirty again; the
    // next pass then sees the status they produced.
  }
}

}  // namespace gg::sim
