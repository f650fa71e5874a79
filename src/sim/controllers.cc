// Simulated kubelet, disruption controller, scheduler and workload controllers.
#include "sim/controllers.h"

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "common/time_util.h"
#include "sim/pdb.h"
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);

// An in-process watch that restarts (with a fresh initial state) if it overflows.
class StoreWatch {
 public:
  StoreWatch(Store& store, std::string storage) : store_(store), storage_(std::move(storage)) {
    Restart();
  }
  ~StoreWatch() { store_.StopWatch(w_); }
  void Pop(std::deque<WatchEvent>& out, std::chrono::milliseconds wait) {
    if (!w_->Pop(out, wait)) {
      store_.StopWatch(w_);
      Restart();
    }
  }

 private:
  void Restart() {
    w_ = store_.StartWatch(storage_, "", LabelSelector(), FieldSelector(), std::nullopt).watcher;
  }
  Store& store_;
  std::string storage_;
  std::shared_ptr<Watcher> w_;
};

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return "";
    cur = &(*cur)[p];
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

}  // namespace

long PodGpuRequest(const json& pod) {
  long total = 0;
  if (!pod.contains("spec") || !pod["spec"].is_object()) return 0;
  for (const auto& c : pod["spec"].value("containers", json::array())) {
    if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
    const auto& r = c["resources"];
    for (const char* k : {"limits", "requests"}) {
      if (r.contains(k) && r[k].is_object() && r[k].contains("nvidia.com/gpu")) {
        const auto& v = r[k]["nvidia.com/gpu"];
        long n = 0;
        if (v.is_number_integer()) n = v.get<long>();
        if (v.is_string()) {
          try {
            n = std::stol(v.get<std::string>());
          } catch (...) {
          }
        }
        total += n;
        break;
      }
    }
  }
  return total;
}

bool ToleratesTaints(const json& pod, const json& node) {
  json tolerations = pod.contains("spec") ? pod["spec"].value("tolerations", json::array()) : json::array();
  json taints = node.contains("spec") ? node["spec"].value("taints", json::array()) : json::array();
  for (const auto& t : taints) {
    if (!t.is_object()) continue;
    std::string effect = t.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    bool ok = false;
    for (const auto& tol : tolerations) {
      if (!tol.is_object()) continue;
      std::string op = tol.value("operator", "Equal");
      std::string key = tol.value("key", "");
      std::string teff = tol.value("effect", "");
      if (!teff.empty() && teff != effect) continue;
      if (op == "Exists") {
        if (key.empty() || key == t.value("key", "")) ok = true;
      } else if (key == t.value("key", "") && tol.value("value", "") == t.value("value", "")) {
        ok = true;
      }
      if (ok) break;
    }
    if (!ok) return false;
  }
  return true;
}

void Controllers::Start() {
  if (opts_.kubelet) threads_.emplace_back([this](std::stop_token s) { KubeletLoop(s); });
  if (opts_.controllers) threads_.emplace_back([this](std::stop_token s) { PdbLoop(s); });
  if (opts_.scheduler) threads_.emplace_back([this](std::stop_token s) { SchedulerLoop(s); });
  if (opts_.controllers) threads_.emplace_back([this](std::stop_token s) { WorkloadLoop(s); });
}

void Controllers::Stop() {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();  // joins
}

void Controllers::KubeletLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto nodes_ri = core_.registry().Find("", "v1", "nodes");
  StoreWatch watch(core_.store(), pods_ri->storage);
  std::multimap<SteadyTime, std::tuple<std::string, std::string, std::string>> due;
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    watch.Pop(evs, kPoll);
    auto now = std::chrono::steady_clock::now();
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) continue;
      json p = json::parse(e.obj->json, nullptr, false);
      if (!p.is_object()) continue;
      const json& md = p["metadata"];
      if (md.contains("deletionTimestamp")) {
        long grace = md.value("deletionGracePeriodSeconds", 0L);
        auto delay = std::chrono::milliseconds(
            static_cast<long>(static_cast<double>(grace) * 1000.0 / std::max(opts_.time_scale, 1e-6)));
        due.emplace(now + delay, std::make_tuple(e.obj->ns, e.obj->name, e.obj->uid));
        continue;
      }
      std::string node = Str(p, {"spec", "nodeName"});
      std::string phase = Str(p, {"status", "phase"});
      if (node.empty() || !(phase.empty() || phase == "Pending")) continue;
      if (!core_.Get(Target{nodes_ri, "", node, ""}).ok()) continue;
      std::string ts = core_.NowRfc3339();
      json conds = json::array();
      for (const char* c : {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"})
        conds.push_back({{"type", c}, {"status", "True"}, {"lastProbeTime", nullptr}, {"lastTransitionTime", ts}});
      json cstat = json::array();
      for (const auto& c : p["spec"].value("containers", json::array()))
        cstat.push_back({{"name", c.value("name", "")},
                         {"image", c.value("image", "")},
                         {"imageID", ""},
                         {"ready", true},
                         {"started", true},
                         {"restartCount", 0},
                         {"state", {{"running", {{"startedAt", ts}}}}}});
      json patch = {{"status",
                     {{"phase", "Running"},
                      {"startTime", ts},
                      {"hostIP", "10.0.0.1"},
                      {"podIP", "10.244.0.1"},
                      {"conditions", conds},
                      {"containerStatuses", cstat}}}};
      core_.Patch(Target{pods_ri, e.obj->ns, e.obj->name, "status"}, "application/merge-patch+json",
                  patch, WriteOpts{});
    }
    while (!due.empty() && due.begin()->first <= now) {
      auto [ns, name, uid] = due.begin()->second;
      due.erase(due.begin());
      core_.FinishTermination(Target{pods_ri, ns, name, ""}, uid);
    }
  }
}

void Controllers::PdbLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto pdb_ri = core_.registry().Find("policy", "v1", "poddisruptionbudgets");
  StoreWatch pods(core_.store(), pods_ri->storage);
  StoreWatch pdbs(core_.store(), pdb_ri->storage);
  std::set<std::string> dirty;
  auto scale = [this](const json& ref, std::string_view ns) -> std::optional<int> {
    std::string kind = ref.value("kind", "");
    std::string name = ref.value("name", "");
    std::shared_ptr<const ResourceInfo> ri;
    if (kind == "ReplicaSet") ri = core_.registry().Find("apps", "v1", "replicasets");
    if (kind == "Deployment") ri = core_.registry().Find("apps", "v1", "deployments");
    if (kind == "StatefulSet") ri = core_.registry().Find("apps", "v1", "statefulsets");
    if (!ri) return std::nullopt;
    auto r = core_.Get(Target{ri, std::string(ns), name, ""});
    if (!r.ok() || !r.obj.contains("spec")) return std::nullopt;
    return r.obj["spec"].value("replicas", 1);
  };
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    pdbs.Pop(evs, std::chrono::milliseconds(0));
    pods.Pop(evs, kPoll);
    for (const auto& e : evs) dirty.insert(e.obj->ns);
    if (dirty.empty()) continue;
    std::set<std::string> again;
    for (const auto& ns : dirty) {
      for (const json& pdb : core_.ListObjects(pdb_ri->storage, ns)) {
        std::vector<json> selected;
        auto sel = LabelSelector::FromJson(pdb["spec"].value("selector", json()));
        if (sel.ok()) {
          std::scoped_lock lock(core_.store().mu());
          core_.store().ForEachLocked(pods_ri->storage, ns, "", [&](const std::string&, const ObjPtr& o) {
            if (!sel->SelectsNothing() && MatchesLabels(*sel, o->labels)) selected.push_back(json::parse(o->json));
            return true;
          });
        }
        auto st = ComputePdbStatus(pdb, selected, core_.NowRfc3339(), scale);
        if (!st.ok()) continue;
        json next = ApplyPdbStatus(pdb, *st, core_.NowRfc3339());
        if (next.value("status", json()) == pdb.value("status", json())) continue;
        Target t{pdb_ri, ns, pdb["metadata"].value("name", ""), "status"};
        auto r = core_.Update(t, next, WriteOpts{});
        if (!r.ok() && r.err->code == 409) again.insert(ns);
      }
    }
    dirty = std::move(again);
  }
}

namespace {

struct NodeInfo {
  long gpus = 0;
  bool schedulable = true;
  json node;  // labels + spec (taints) for matching
};

bool NodeSelectorMatches(const json& pod_spec, const json& node) {
  if (!pod_spec.contains("nodeSelector") || !pod_spec["nodeSelector"].is_object()) return true;
  json labels = node["metadata"].value("labels", json::object());
  for (const auto& [k, v] : pod_spec["nodeSelector"].items())
    if (!labels.contains(k) || labels[k] != v) return false;
  return true;
}

NodeInfo MakeNodeInfo(const json& n) {
  NodeInfo ni;
  ni.node = {{"metadata", {{"labels", n["metadata"].value("labels", json::object())}}},
             {"spec", n.value("spec", json::object())}};
  std::string alloc;
  if (n.contains("status") && n["status"].contains("allocatable")) {
    const auto& a = n["status"]["allocatable"];
    if (a.contains("nvidia.com/gpu") && a["nvidia.com/gpu"].is_string()) alloc = a["nvidia.com/gpu"];
  }
  try {
    ni.gpus = alloc.empty() ? 0 : std::stol(alloc);
  } catch (...) {
    ni.gpus = 0;
  }
  ni.schedulable = !n.value("spec", json::object()).value("unschedulable", false);
  if (n.contains("status") && n["status"].contains("conditions"))
    for (const auto& c : n["status"]["conditions"])
      if (c.value("type", "") == "Ready" && c.value("status", "") == "False") ni.schedulable = false;
  return ni;
}

bool PodActive(const json& p) {
  std::string phase = Str(p, {"status", "phase"});
  return phase != "Succeeded" && phase != "Failed" && !p["metadata"].contains("deletionTimestamp");
}

std::string ControllerUid(const json& p) {
  for (const auto& r : p["metadata"].value("ownerReferences", json::array()))
    if (r.value("controller", false)) return r.value("uid", "");
  return "";
}

}  // namespace

void Controllers::SchedulerLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto nodes_ri = core_.registry().Find("", "v1", "nodes");
  StoreWatch pods(core_.store(), pods_ri->storage);
  StoreWatch nodes(core_.store(), nodes_ri->storage);
  std::map<std::string, NodeInfo> node_info;
  std::map<std::string, std::pair<std::string, long>> placed;  // pod key -> (node, gpus)
  std::map<std::string, long> used;                             // node -> gpus in use
  std::map<std::string, json> pending;                          // pod key -> pod
  auto unplace = [&](const std::string& key) {
    auto it = placed.find(key);
    if (it == placed.end()) return;
    used[it->second.first] -= it->second.second;
    placed.erase(it);
  };
  SteadyTime last_try{};
  bool changed = false;
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    nodes.Pop(evs, std::chrono::milliseconds(0));
    for (const auto& e : evs) {
      changed = true;
      if (e.type == EventType::kDeleted) {
        node_info.erase(e.obj->name);
        continue;
      }
      json n = json::parse(e.obj->json, nullptr, false);
      if (n.is_object()) node_info[e.obj->name] = MakeNodeInfo(n);
    }
    evs.clear();
    pods.Pop(evs, kPoll);
    for (const auto& e : evs) {
      std::string key = e.obj->ns + "/" + e.obj->name;
      unplace(key);
      pending.erase(key);
      if (e.type == EventType::kDeleted) {
        changed = true;
        continue;
      }
      json p = json::parse(e.obj->json, nullptr, false);
      if (!p.is_object()) continue;
      std::string node = Str(p, {"spec", "nodeName"});
      if (!node.empty()) {
        if (PodActive(p)) {
          long g = PodGpuRequest(p);
          placed[key] = {node, g};
          used[node] += g;
        } else {
          changed = true;
        }
        continue;
      }
      std::string sched = Str(p, {"spec", "schedulerName"});
      if (PodActive(p) && (sched.empty() || sched == "default-scheduler")) {
        pending[key] = std::move(p);
        changed = true;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (pending.empty() || !changed || now - last_try < std::chrono::milliseconds(200)) continue;
    last_try = now;
    changed = false;
    for (auto it = pending.begin(); it != pending.end();) {
      const json& p = it->second;
      long want = PodGpuRequest(p);
      std::string chosen;
      for (const auto& [name, ni] : node_info) {
        if (!ni.schedulable || !ToleratesTaints(p, ni.node) || !NodeSelectorMatches(p["spec"], ni.node))
          continue;
        if (want > 0 && ni.gpus - used[name] < want) continue;
        chosen = name;
        break;
      }
      if (chosen.empty()) {
        ++it;
        continue;
      }
      Target t{pods_ri, p["metadata"].value("namespace", ""), p["metadata"].value("name", ""), ""};
      auto r = core_.Patch(t, "application/merge-patch+json", {{"spec", {{"nodeName", chosen}}}},
                           WriteOpts{});
      if (r.ok()) {
        used[chosen] += want;
        placed[it->first] = {chosen, want};
      }
      it = pending.erase(it);
    }
  }
}

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
  std::map<std::string, json> deployments;     // uid -> Deployment
  std::map<std::string, std::string> rs_owner;  // ReplicaSet uid -> its Deployment's uid
  std::set<std::string> dirty_deploys;
  std::map<std::string, SteadyTime> deploy_seen;  // uid -> first seen
  struct Owned {
    std::string node;
    bool active = false;
  };
  std::map<std::string, std::map<std::string, Owned>> owned;  // owner uid -> pod key -> info
  std::map<std::string, json> owners;                          // owner uid -> DS/RS object
  std::map<std::string, json> node_objs;
  std::set<std::string> dirty;  // owner uids
  SteadyTime last{};
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    // Deployment controller: each Deployment owns one ReplicaSet of its template (named
    // <deployment>-<template hash>, label pod-template-hash) scaled to spec.replicas.
    // Rollouts of a changed template are not simulated.
    deploys.Pop(evs, std::chrono::milliseconds(0));
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) {
        deployments.erase(e.obj->uid);
        continue;
      }
      json o = json::parse(e.obj->json, nullptr, false);
      if (!o.is_object()) continue;
      deployments[e.obj->uid] = std::move(o);
      deploy_seen.emplace(e.obj->uid, std::chrono::steady_clock::now());
      dirty_deploys.insert(e.obj->uid);
    }
    evs.clear();
    dss.Pop(evs, std::chrono::milliseconds(0));
    rss.Pop(evs, std::chrono::milliseconds(0));
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) {
        owners.erase(e.obj->uid);
        if (auto it = rs_owner.find(e.obj->uid); it != rs_owner.end()) {
          dirty_deploys.insert(it->second);
          rs_owner.erase(it);
        }
        continue;
      }
      json o = json::parse(e.obj->json, nullptr, false);
      if (!o.is_object()) continue;
      if (o.value("kind", "") == "ReplicaSet") {
        std::string d = ControllerUid(o);
        if (!d.empty()) {
          if (!rs_owner.count(e.obj->uid)) dirty_deploys.insert(d);
          rs_owner[e.obj->uid] = d;
        }
      }
      owners[e.obj->uid] = std::move(o);
      dirty.insert(e.obj->uid);
    }
    std::set<std::string> deploys_later;
    for (const auto& duid : dirty_deploys) {
      auto dit = deployments.find(duid);
      if (dit == deployments.end()) {
        deploy_seen.erase(duid);
        continue;
      }
      const json& d = dit->second;
      if (d["metadata"].contains("deletionTimestamp")) continue;
      std::string ns = d["metadata"].value("namespace", "");
      std::string name = d["metadata"].value("name", "");
      long want = d.contains("spec") ? d["spec"].value("replicas", 1L) : 1L;
      std::string mine;
      for (const auto& [rsuid, owner] : rs_owner)
        if (owner == duid) mine = rsuid;
      if (!mine.empty()) {
        auto oit = owners.find(mine);
        if (oit == owners.end()) continue;
        const json& rs = oit->second;
        long have = rs.contains("spec") ? rs["spec"].value("replicas", 1L) : 1L;
        if (have != want)
          core_.Patch(Target{rs_ri, ns, rs["metadata"].value("name", ""), ""},
                      "application/merge-patch+json", {{"spec", {{"replicas", want}}}}, WriteOpts{});
        continue;
      }
      // A seeded Deployment's ReplicaSet may be written just after it: give it a moment
      // before creating one, or the Deployment would end up with two.
      if (std::chrono::steady_clock::now() - deploy_seen[duid] < std::chrono::seconds(2)) {
        deploys_later.insert(duid);
        continue;
      }
      json tmpl = d.contains("spec") ? d["spec"].value("template", json::object()) : json::object();
      // pod-template-hash: a short stable hash of the template, as the real controller adds.
      std::uint64_t h = 1469598103934665603ULL;
      for (unsigned char c : tmpl.dump()) h = (h ^ c) * 1099511628211ULL;
      static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
      std::string hash;
      for (int i = 0; i < 10; ++i, h /= 27) hash += kAlphabet[h % 27];
      tmpl["metadata"]["labels"]["pod-template-hash"] = hash;
      json sel = d.contains("spec") ? d["spec"].value("selector", json::object()) : json::object();
      sel["matchLabels"]["pod-template-hash"] = hash;
      json rs = {{"apiVersion", "apps/v1"},
                 {"kind", "ReplicaSet"},
                 {"metadata",
                  {{"name", name + "-" + hash},
                   {"namespace", ns},
                   {"labels", tmpl["metadata"]["labels"]},
                   {"ownerReferences",
                    {{{"apiVersion", "apps/v1"},
                      {"kind", "Deployment"},
                      {"name", name},
                      {"uid", duid},
                      {"controller", true},
                      {"blockOwnerDeletion", true}}}}}},
                 {"spec", {{"replicas", want}, {"selector", sel}, {"template", tmpl}}}};
      core_.Create(Target{rs_ri, ns, "", ""}, std::move(rs), WriteOpts{});
    }
    dirty_deploys = std::move(deploys_later);
    evs.clear();
    nodes.Pop(evs, std::chrono::milliseconds(0));
    bool nodes_changed = false;
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) {
        node_objs.erase(e.obj->name);
        nodes_changed = true;
        continue;
      }
      json n = json::parse(e.obj->json, nullptr, false);
      if (!n.is_object()) continue;
      bool is_new = !node_objs.count(e.obj->name);
      node_objs[e.obj->name] = MakeNodeInfo(n).node;
      nodes_changed |= is_new;
    }
    if (nodes_changed)
      for (const auto& [uid, o] : owners)
        if (o.value("kind", "") == "DaemonSet") dirty.insert(uid);
    evs.clear();
    pods.Pop(evs, kPoll);
    for (const auto& e : evs) {
      std::string key = e.obj->ns + "/" + e.obj->name;
      json p = json::parse(e.obj->json, nullptr, false);
      if (!p.is_object()) continue;
      std::string uid = ControllerUid(p);
      if (uid.empty()) continue;
      if (e.type == EventType::kDeleted) {
        owned[uid].erase(key);
        dirty.insert(uid);
        continue;
      }
      bool active = PodActive(p);
      if (!owned[uid].count(key)) dirty.insert(uid);  // new pod: maybe a surplus now
      auto& slot = owned[uid][key];
      if (slot.active && !active) dirty.insert(uid);
      slot.node = Str(p, {"spec", "nodeName"});
      slot.active = active;
    }
    auto now = std::chrono::steady_clock::now();
    if (dirty.empty() || now - last < std::chrono::milliseconds(100)) continue;
    last = now;
    for (const auto& uid : dirty) {
      auto it = owners.find(uid);
      if (it == owners.end()) continue;
      const json& o = it->second;
      if (o["metadata"].contains("deletionTimestamp")) continue;
      std::string kind = o.value("kind", "");
      std::string ns = o["metadata"].value("namespace", "");
      std::string name = o["metadata"].value("name", "");
      json tmpl = o.contains("spec") ? o["spec"].value("template", json::object()) : json::object();
      auto make_pod = [&](const std::string& node) {
        json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata",
                     {{"generateName", name + "-"},
                      {"namespace", ns},
                      {"labels", tmpl.contains("metadata") ? tmpl["metadata"].value("labels", json::object())
                                                           : json::object()},
                      {"ownerReferences",
                       {{{"apiVersion", "apps/v1"},
                         {"kind", kind},
                         {"name", name},
                         {"uid", uid},
                         {"controller", true},
                         {"blockOwnerDeletion", true}}}}}},
                    {"spec", tmpl.value("spec", json::object())}};
        if (!node.empty()) pod["spec"]["nodeName"] = node;
        core_.Create(Target{pods_ri, ns, "", ""}, std::move(pod), WriteOpts{});
      };
      auto& mine = owned[uid];
      if (kind == "DaemonSet") {
        std::set<std::string> covered;
        for (const auto& [k, info] : mine) {
          if (!info.active) continue;
          if (!covered.insert(info.node).second) {  // a second pod on one node: surplus
            auto slash = k.find('/');
            core_.Delete(Target{pods_ri, k.substr(0, slash), k.substr(slash + 1), ""},
                         json::object(), WriteOpts{});
          }
        }
        json pod_like = {{"spec", tmpl.value("spec", json::object())}};
        // DaemonSet pods tolerate unschedulable nodes (the controller adds that toleration).
        for (const auto& [node, nj] : node_objs) {
          if (covered.count(node)) continue;
          if (!NodeSelectorMatches(pod_like["spec"], nj) || !ToleratesTaints(pod_like, nj)) continue;
          make_pod(node);
        }
      } else if (kind == "ReplicaSet") {
        long want = o.contains("spec") ? o["spec"].value("replicas", 1L) : 1L;
        long have = 0;
        for (const auto& [k, info] : mine) have += info.active ? 1 : 0;
        for (long i = have; i < want; ++i) make_pod("");
        // Too many (e.g. seeded pods arrived after we had already replaced them): delete
        // the surplus, unscheduled ones first.
        if (have > want) {
          std::vector<std::string> keys;
          for (const auto& [k, info] : mine)
            if (info.active && info.node.empty()) keys.push_back(k);
          for (const auto& [k, info] : mine)
            if (info.active && !info.node.empty()) keys.push_back(k);
          for (long i = 0; i < have - want && i < static_cast<long>(keys.size()); ++i) {
            auto slash = keys[i].find('/');
            core_.Delete(Target{pods_ri, keys[i].substr(0, slash), keys[i].substr(slash + 1), ""},
                         json::object(), WriteOpts{});
          }
        }
      }
    }
    dirty.clear();
  }
}

}  // namespace gg::sim
