// Simulated Deployment, ReplicaSet and DaemonSet controllers.
#include "sim/controllers.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <set>

#include "sim/controller_util.h"

namespace gg::sim {

using nlohmann::json;
using internal::ControllerUid;
using internal::kPoll;
using internal::MakeNodeInfo;
using internal::NodeInfo;
using internal::NodeSelectorMatches;
using internal::PodActive;
using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;

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
