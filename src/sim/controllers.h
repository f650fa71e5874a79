// Simulated cluster behavior for the API server simulator. Each loop runs on its own thread,
// fed by in-process watches on the store (its initial state is the loop's first full list,
// like an informer's sync), and writes through ApiCore like a client:
//   kubelet (kubelet.cc)            runs bound pods, finishes graceful termination
//   node heartbeats (node_lifecycle.cc)  each node's kubelet renews its Lease in kube-node-lease
//   scheduler (scheduler.cc)        binds pending pods: resources, taints, node affinity;
//                                   PodScheduled=False/Unschedulable and scheduler Events
//   disruption controller           keeps PodDisruptionBudget status current
//   workload controllers            Deployments (rolling/recreate rollouts), ReplicaSets,
//                                   DaemonSets, with their status
//   node lifecycle controller       lease monitoring -> Ready Unknown + unreachable/not-ready
//                                   taints; the unschedulable taint on cordon; NoExecute
//                                   taint eviction with tolerationSeconds
//   garbage collector (garbage_collector.cc)  ownerReferences: background, foreground, orphan
#pragma once

#include <chrono>
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
  bool kubelet = true;  // also the nodes' Lease heartbeats
  bool scheduler = true;
  bool controllers = true;  // PDB status, workloads, node lifecycle, taint eviction, GC
  double time_scale = 1.0;  // grace periods, lease intervals and tolerationSeconds divided by this
  class PodRunner* pod_runner = nullptr;  // --exec-images: pods run as processes (pod_runner.h)
};

// Node lifecycle timing (kubelet and kube-controller-manager defaults), before time scaling.
inline constexpr std::chrono::seconds kNodeLeaseDuration{40};
inline constexpr std::chrono::seconds kNodeLeaseRenewInterval{10};  // 1/4 of the duration
inline constexpr std::chrono::seconds kNodeMonitorGracePeriod{40};
// Scaled grace periods never drop below this: a busy 2-core machine can stall a loop for a
// second, and a node must not go NotReady for that.
inline constexpr std::chrono::milliseconds kMinNodeMonitorGrace{3000};
// Annotation on a Node that stops (value "stopped") its simulated kubelet's heartbeat: the
// Lease is no longer renewed, as when a node loses power or its network.
inline constexpr const char* kHeartbeatAnnotation = "sim.gpuguardian.io/heartbeat";

class Controllers {
 public:
  Controllers(ApiCore& core, ControllerOptions opts) : core_(core), opts_(opts) {}
  ~Controllers() { Stop(); }
  void Start();
  void Stop();

  // Duration d of cluster time in wall time.
  std::chrono::milliseconds Scaled(std::chrono::milliseconds d) const;

 private:
  void KubeletLoop(std::stop_token stop);
  void NodeHeartbeatLoop(std::stop_token stop);
  void PdbLoop(std::stop_token stop);
  void SchedulerLoop(std::stop_token stop);
  void WorkloadLoop(std::stop_token stop);
  void NodeLifecycleLoop(std::stop_token stop);
  void TaintEvictionLoop(std::stop_token stop);
  void DeviceTaintEvictionLoop(std::stop_token stop);  // device_taint_eviction.cc
  void GarbageCollectorLoop(std::stop_token stop);

  ApiCore& core_;
  ControllerOptions opts_;
  std::vector<std::jthread> threads_;
};

// Pure helpers (exposed for tests).
bool ToleratesTaints(const nlohmann::json& pod, const nlohmann::json& node);
long PodGpuRequest(const nlohmann::json& pod);
// The scheduler's explanation for a pod that fits nowhere, in the real scheduler's shape:
// "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu.
// preemption: ...". `reasons`: per node its first failing reason.
std::string UnschedulableMessage(std::size_t nodes, const std::vector<std::string>& reasons);

// The hash the workload controllers label their pods with (pod-template-hash of a
// Deployment's ReplicaSet, controller-revision-hash of a DaemonSet's pods): 10 characters
// from the real alphabet, stable for a template. Seeded DaemonSet pods carry it so that
// they count as up to date.
std::string PodTemplateHash(const nlohmann::json& pod_template);

// API-server side of the cluster's behaviour (called by ApiCore):
// The DefaultTolerationSeconds admission plugin: a pod that does not already tolerate
// node.kubernetes.io/not-ready or unreachable with effect NoExecute gets a toleration for
// each (operator Exists, tolerationSeconds 300), so a node going away evicts it after 5 min.
void AddDefaultTolerationSeconds(nlohmann::json& pod);
// API defaulting of the workload fields the controllers and kubectl read: Deployment
// replicas/strategy (RollingUpdate 25%/25%)/revisionHistoryLimit/progressDeadlineSeconds,
// ReplicaSet replicas, DaemonSet updateStrategy (RollingUpdate, maxUnavailable 1,
// maxSurge 0)/revisionHistoryLimit. `resource` is the plural of apps/v1.
void ApplyWorkloadDefaults(const std::string& group, const std::string& resource,
                           nlohmann::json& obj);
// The finalizer a DELETE's options ask the garbage collector to honour: "foregroundDeletion"
// (propagationPolicy Foreground), "orphan" (Orphan, or the deprecated orphanDependents), or "".
std::string PropagationFinalizer(const nlohmann::json& delete_options);

}  // namespace gg::sim
