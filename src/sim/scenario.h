// Scenario files: a YAML description of an explicit cluster (nodes with GPU counts,
// products, labels and taints; workloads as Deployments/Jobs/DaemonSets with replicas, GPU
// requests, priority and PDBs; DRA on/off; kube version) turned into the same objects the
// population generator emits. Errors carry the YAML line.
//
// Format (all keys optional unless noted):
//   kubeVersion: "1.35"
//   dra: true
//   seed: 7
//   population: {nodes: 10, gpusPerNode: 8, podsPerNode: 2, gpuProduct: ...}  # generated part
//   nodes:
//     - name: gpu-a            # required
//       gpus: 8                # default 8
//       product: NVIDIA-H100-80GB-HBM3
//       labels: {zone: a}
//       taints: [{key: k, value: v, effect: NoSchedule}]
//       unschedulable: false
//       count: 3               # expands to gpu-a-0 .. gpu-a-2
//       driverTaints:          # with dra: taints the DRA driver publishes in the node's slice
//         - {device: gpu-3, key: gpu.nvidia.com/xid, value: "79", effect: NoSchedule}
//                              # (key/value/effect default to those; 1.33+, None from 1.35)
//   workloads:
//     - name: infer            # required
//       kind: Deployment       # Deployment | Job | DaemonSet | ReplicaSet (default Deployment)
//       namespace: ml
//       replicas: 4
//       gpus: 1                # nvidia.com/gpu request+limit per pod
//       priorityClassName: high
//       nodes: [gpu-a-0, gpu-a-1]   # pods placed round-robin on these (default: all
//                                   # schedulable nodes without NoSchedule/NoExecute taints,
//                                   # while they have free GPUs); DaemonSet: every node
//       labels: {app: infer}
//       pdb: {minAvailable: 3}       # or {maxUnavailable: "25%"}
//   objects: [ ...raw Kubernetes objects, emitted as is... ]
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"
#include "sim/population.h"

namespace gg::sim {

struct Scenario {
  std::string kube_version = "1.35";
  bool dra = false;
  uint64_t seed = 1;
  nlohmann::json doc;  // the parsed YAML as JSON (validated)
};

// Parses and validates; InvalidArgument "scenario line N: <problem>" (or
// "scenario: yaml: line N, column C: <parser error>").
StatusOr<Scenario> ParseScenario(std::string_view yaml_text);
StatusOr<Scenario> LoadScenarioFile(const std::string& path);

// Emits the scenario's objects in dependency order (namespaces, daemonsets, workloads,
// pdbs, nodes, pods, resourceslices, raw objects), like GeneratePopulation. Pods placed on
// nodes get status.phase Running and Ready; pods that do not fit are emitted Pending
// without spec.nodeName.
Status EmitScenario(const Scenario& scenario, const ObjectSink& sink);

}  // namespace gg::sim
