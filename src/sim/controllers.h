// Simulated cluster behavior for the API server simulator: a kubelet that runs bound pods
// and finishes graceful termination, the disruption controller keeping PDB status current,
// a scheduler that binds pending pods (taints, unschedulable, free nvidia.com/gpu), and
// DaemonSet / ReplicaSet controllers that keep their pods, and a Deployment controller that
// gives each Deployment one ReplicaSet of its template, scaled to spec.replicas. Each runs on its own thread,
// fed by an in-process watch on the store, and writes through ApiCore like a client.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "sim/api.h"

namespace gg::sim {

struct ControllerOptions {
  bool kubelet = true;
  bool scheduler = true;
  bool controllers = true;  // PDB status, DaemonSets, ReplicaSets
  double time_scale = 1.0;  // grace periods divided by this
  class PodRunner* pod_runner = nullptr;  // --exec-images: pods run as processes (pod_runner.h)
};

class Controllers {
 public:
  Controllers(ApiCore& core, ControllerOptions opts) : core_(core), opts_(opts) {}
  ~Controllers() { Stop(); }
  void Start();
  void Stop();

 private:
  void KubeletLoop(std::stop_token stop);
  void PdbLoop(std::stop_token stop);
  void SchedulerLoop(std::stop_token stop);
  void WorkloadLoop(std::stop_token stop);

  ApiCore& core_;
  ControllerOptions opts_;
  std::vector<std::jthread> threads_;
};

// Pure helpers (exposed for tests).
bool ToleratesTaints(const nlohmann::json& pod, const nlohmann::json& node);
long PodGpuRequest(const nlohmann::json& pod);

}  // namespace gg::sim
