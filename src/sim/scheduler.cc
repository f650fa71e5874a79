// Simulated scheduler: binds pending pods to schedulable nodes whose taints they tolerate,
// whose nodeSelector matches and that have the nvidia.com/gpu they request free.
#include "sim/controllers.h"

#include <chrono>
#include <map>

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

}  // namespace gg::sim
