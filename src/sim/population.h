// Synthetic GPU cluster population: realistic Node objects (GPU feature-discovery labels,
// capacity incl. nvidia.com/gpu, conditions, nodeInfo, images, managedFields; ~15 KB each,
// shaped like the Node objects of real GPU nodes), workload controllers and their pods,
// DaemonSet pods, PDBs and (with DRA) one ResourceSlice per node. Streamed through a callback
// so 100k nodes never sit in memory at once; deterministic for a given spec and seed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gg::sim {

// A device taint as NVIDIA's DRA driver publishes it in its own ResourceSlice (its health
// check, gate NVMLDeviceHealthCheck): key gpu.nvidia.com/xid, the Xid as value, NoSchedule
// for a critical Xid (None for an application Xid, from 1.35).
struct DriverTaintSpec {
  int node = 0;        // population: node index
  std::string device;  // slice device name: "gpu-3", "gpu-2-mig-19-1-1"
  std::string key = "gpu.nvidia.com/xid";
  std::string value = "79";
  std::string effect = "NoSchedule";
  std::string time_added;  // RFC 3339; empty: left to the API server (it sets it)
};

struct PopulationSpec {
  int nodes = 4;
  int gpus_per_node = 8;
  int pods_per_node = 2;  // workload pods per node (each requests gpus_per_node/pods_per_node)
  std::string gpu_product = "NVIDIA-H100-80GB-HBM3";
  bool dra = false;                       // emit ResourceSlices
  std::string kube_version = "1.35";      // "1.32".."1.36": kubeletVersion, ResourceSlice shape
  std::string node_prefix = "gpu-node-";  // node names: <prefix><index, 5 digits: 00000>
  uint64_t seed = 1;
  int nodes_per_workload = 4;  // a Deployment or Job spans this many nodes' pods
  bool daemonset_pods = true;  // nvidia-device-plugin + gpu-guardian-agent per node
  bool pdbs = true;            // one PDB per Deployment (maxUnavailable 1 / minAvailable 50%)
  std::string workload_namespace = "ml";
  std::string system_namespace = "gpu-system";
  // creationTimestamp / lastHeartbeatTime of everything generated.
  std::string creation_timestamp = "2026-01-01T00:00:00Z";
  std::map<std::string, std::string> extra_node_labels;
  // MIG: every GPU partitioned into this many 1g instances (0: no MIG; at most 7). With `dra`
  // the ResourceSlice then publishes the MIG devices instead of the GPUs (MigLayout).
  int mig_devices_per_gpu = 0;
  // With `dra`: taints the driver publishes on devices of the nodes' slices (AddDriverTaint).
  std::vector<DriverTaintSpec> driver_taints;
};

// Receives each generated object (kind/apiVersion/metadata set, including a deterministic
// metadata.uid and creationTimestamp, but no resourceVersion). Returning an error stops
// generation and is passed through.
using ObjectSink = std::function<Status(nlohmann::json&& obj)>;

// Emission order (owners before dependants): Namespaces (ml, gpu-system), PriorityClasses
// (scheduling.k8s.io/v1 — skip them if not served), DaemonSets, then per workload its
// Deployment + ReplicaSet (or Job) and PDB, then per node: Node, its DaemonSet pods, its
// workload pods, its ResourceSlice (dra). InvalidArgument on nonsensical specs (negative
// counts, gpus_per_node > 64, pods_per_node > 110).
Status GeneratePopulation(const PopulationSpec& spec, const ObjectSink& sink);

// Counts of what GeneratePopulation emits for `spec` (without generating).
struct PopulationCounts {
  int64_t nodes = 0, pods = 0, daemonsets = 0, replicasets = 0, deployments = 0, jobs = 0, pdbs = 0,
          resourceslices = 0, namespaces = 0, priorityclasses = 0;
};
PopulationCounts CountPopulation(const PopulationSpec& spec);

// One Node as GeneratePopulation makes it (index 0-based). Exposed for scenarios.
nlohmann::json MakeGpuNode(const PopulationSpec& spec, int index, std::string_view name, int gpus,
                           std::string_view product,
                           const std::map<std::string, std::string>& extra_labels = {},
                           const nlohmann::json& taints = nullptr);

// One MIG device of a partitioned GPU as the simulator lays them out: 1g instances in
// placement order 0.., GPU-instance id = placement start + 1, compute instance 0.
struct MigSlot {
  uint32_t gpu_instance = 0;
  uint32_t compute_instance = 0;
  int start = 0;        // memory-slice placement start (size 1)
  std::string profile;  // "1g.10gb" on an 80 GB GPU
  int memory_mib = 0;
};
std::vector<MigSlot> MigLayout(std::string_view product, int devices);

// One ResourceSlice for `node` with `gpus` devices "gpu-0".. (driver gpu.nvidia.com,
// pool = node name, attributes uuid/productName/index, capacity memory), in the shape of
// ResourceSliceApiVersion(kube_version): v1beta1 puts attributes under devices[].basic.
// With `mig_devices_per_gpu` > 0 each GPU is published as NVIDIA's DRA driver publishes a
// MIG-enabled GPU: not itself, but one device per MIG device, named
// "gpu-<index>-mig-<GI profile id>-<placement start>-<size>", attributes type=mig,
// uuid (FakeMigUuid), parentUUID (the GPU's), profile, productName; capacity memory and
// memorySlice<start>.
nlohmann::json MakeResourceSlice(std::string_view node, int gpus, std::string_view product,
                                 std::string_view kube_version, uint64_t seed = 1,
                                 int mig_devices_per_gpu = 0);
// Publishes `t` on device `t.device` of `slice` (from MakeResourceSlice) where the slice's
// version keeps device taints: `devices[].basic.taints` in v1beta1, `devices[].taints` in
// v1beta2/v1. InvalidArgument when the release serves no device taints (before 1.33), the
// effect is not one it knows (None only from 1.35), or the slice has no such device.
Status AddDriverTaint(nlohmann::json& slice, const DriverTaintSpec& t,
                      std::string_view kube_version);
// "resource.k8s.io/v1beta1" for 1.32-1.33, "resource.k8s.io/v1" for 1.34+.
std::string ResourceSliceApiVersion(std::string_view kube_version);

// GPU memory in MiB for a product label ("NVIDIA-H100-80GB-HBM3" -> 81559); 0 if unknown.
int GpuMemoryMiB(std::string_view product);

// Deterministic GPU UUID for GPU `index` on `node`; the agent's fake NVML must use the same:
//   s  = node + "/" + decimal(index)
//   h1 = FNV-1a-64(s), h2 = FNV-1a-64(s + "~")   (offset 0xcbf29ce484222325,
//                                                  prime 0x100000001b3, over the bytes)
//   hex = lowercase 16-digit hex of h1 followed by that of h2 (32 digits)
//   uuid = "GPU-" + hex[0:8] + "-" + hex[8:12] + "-" + hex[12:16] + "-" + hex[16:20] + "-"
//          + hex[20:32]
// e.g. FakeGpuUuid("gpu-node-00000", 0) — see population_test.cc for pinned values.
std::string FakeGpuUuid(std::string_view node, int index);

// The MIG device UUID the agent's fake NVML gives GPU instance `gi` / compute instance `ci`
// of the GPU `gpu_uuid`: "MIG-" + the GPU UUID without "GPU-", its last four hex digits
// replaced by gi and ci as two lowercase hex digits each.
std::string FakeMigUuid(std::string_view gpu_uuid, uint32_t gi, uint32_t ci);

// Deterministic RFC 4122-shaped UUID (version 4 bits set) from a string key and seed.
std::string DeterministicUid(std::string_view key, uint64_t seed);

}  // namespace gg::sim
