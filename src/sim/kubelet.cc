// Simulated kubelet: starts the pods bound to existing nodes and finishes their graceful
// termination once the grace period (divided by the time scale) has passed.
#include "sim/controllers.h"

#include <chrono>
#include <map>
#include <tuple>

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

}  // namespace gg::sim
