// The simulated cluster's control loops: start and stop, and the pure helpers they share.
// Each loop lives in its own file (kubelet.cc, scheduler.cc, disruption_controller.cc,
// workload_controllers.cc, node_lifecycle.cc, garbage_collector.cc).
#include "sim/controllers.h"

#include <algorithm>
#include <string>

namespace gg::sim {

using nlohmann::json;

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
  json tolerations =
      pod.contains("spec") ? pod["spec"].value("tolerations", json::array()) : json::array();
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

std::chrono::milliseconds Controllers::Scaled(std::chrono::milliseconds d) const {
  double scale = std::max(opts_.time_scale, 1e-6);
  return std::chrono::milliseconds(static_cast<long long>(static_cast<double>(d.count()) / scale));
}

void Controllers::Start() {
  if (!threads_.empty()) return;
  if (opts_.kubelet) threads_.emplace_back([this](std::stop_token s) { KubeletLoop(s); });
  if (opts_.kubelet) threads_.emplace_back([this](std::stop_token s) { NodeHeartbeatLoop(s); });
  if (opts_.controllers) threads_.emplace_back([this](std::stop_token s) { PdbLoop(s); });
  if (opts_.scheduler) threads_.emplace_back([this](std::stop_token s) { SchedulerLoop(s); });
  if (opts_.controllers) {
    threads_.emplace_back([this](std::stop_token s) { WorkloadLoop(s); });
    threads_.emplace_back([this](std::stop_token s) { NodeLifecycleLoop(s); });
    threads_.emplace_back([this](std::stop_token s) { TaintEvictionLoop(s); });
    threads_.emplace_back([this](std::stop_token s) { DeviceTaintEvictionLoop(s); });
    threads_.emplace_back([this](std::stop_token s) { GarbageCollectorLoop(s); });
  }
}

void Controllers::Stop() {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();  // joins
}

}  // namespace gg::sim
