// Synthetic GPU cluster population (see population.h). Field shapes follow the Node objects
// of real GPU nodes (GFD/NFD labels, capacity strings, conditions, images, nodeInfo,
// managedFields) but every value is generated.
#include "sim/population.h"

#include <algorithm>
#include <cstdio>

#include "sim/admission.h"
#include "sim/controllers.h"

namespace gg::sim {

using nlohmann::json;

namespace {

uint64_t Fnv(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Deterministic hex string of `n` digits for digests.
std::string HexDigits(std::string_view key, size_t n) {
  std::string out;
  uint64_t h = Fnv(key);
  while (out.size() < n) {
    out += Hex16(h);
    h = Fnv(std::to_string(h), h);
  }
  out.resize(n);
  return out;
}

// Kubernetes-style 5 character suffix ("bcdfghjklmnpqrstvwxz2456789").
std::string Suffix(std::string_view key, uint64_t seed) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  uint64_t h = Fnv(key, 0xcbf29ce484222325ULL ^ seed);
  std::string s;
  for (int i = 0; i < 5; ++i) {
    s += kAlphabet[h % 27];
    h /= 27;
  }
  return s;
}

// A suffix that is distinct for every n < 27^5 (an affine bijection mod 27^5, so names still
// look random): hashing node names collided by the birthday bound at ~10k nodes.
std::string UniqueSuffix(uint64_t n, uint64_t seed) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  constexpr uint64_t kMod = 14348907;                                       // 27^5
  uint64_t h = ((n % kMod) * 7919 + (seed % kMod) * 104729 + 4242) % kMod;  // 7919: a unit mod 3^15
  std::string s;
  for (int i = 0; i < 5; ++i) {
    s += kAlphabet[h % 27];
    h /= 27;
  }
  return s;
}

struct GpuInfo {
  std::string family;
  int major, minor, memory_mib;
  std::string instance_type;
};

GpuInfo InfoFor(std::string_view product) {
  auto has = [&](std::string_view s) { return product.find(s) != std::string_view::npos; };
  if (has("H200")) return {"hopper", 9, 0, 143771, "p5en.48xlarge"};
  if (has("H100")) return {"hopper", 9, 0, 81559, "p5.48xlarge"};
  if (has("B200")) return {"blackwell", 10, 0, 183359, "p6-b200.48xlarge"};
  if (has("A100") && has("40GB")) return {"ampere", 8, 0, 40960, "p4d.24xlarge"};
  if (has("A100")) return {"ampere", 8, 0, 81920, "p4de.24xlarge"};
  if (has("L40S")) return {"ada-lovelace", 8, 9, 46068, "g6e.48xlarge"};
  if (has("L4")) return {"ada-lovelace", 8, 9, 23034, "g6.48xlarge"};
  if (has("T4")) return {"turing", 7, 5, 15360, "g4dn.12xlarge"};
  if (has("A16")) return {"ampere", 8, 6, 15356, "a16-vgpu"};
  return {"unknown", 0, 0, 0, "gpu-node"};
}

std::string NodeName(const PopulationSpec& spec, int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%05d", i);
  return spec.node_prefix + buf;
}

json OwnerRef(std::string_view api_version, std::string_view kind, std::string_view name,
              std::string_view uid, bool controller = true) {
  json r = {{"apiVersion", api_version}, {"kind", kind}, {"name", name}, {"uid", uid}};
  if (controller) {
    r["controller"] = true;
    r["blockOwnerDeletion"] = true;
  }
  return r;
}

std::string KubeletVersion(std::string_view kube_version) {
  return "v" + std::string(kube_version) + ".2";
}

// Pod CIDR 10.<64 + node/256 % 64>.<node % 256>.0/24; pod IPs .2, .3, ... inside it.
std::string PodNet(int node) {
  return "10." + std::to_string(64 + ((node >> 8) & 0x3f)) + "." + std::to_string(node & 0xff) +
         ".";
}
std::string PodIp(int node, int slot) { return PodNet(node) + std::to_string(2 + slot % 250); }
std::string PodCidr(int node) { return PodNet(node) + "0/24"; }

struct Workload {
  bool job = false;
  int index = 0;
  std::string name, uid, rs_name, rs_uid, hash;
  int first_node = 0, nodes = 0;
};

Workload WorkloadFor(const PopulationSpec& spec, int w) {
  Workload wl;
  wl.index = w;
  wl.job = (w % 2) == 1;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d", w);
  wl.name = (wl.job ? "train-" : "infer-") + std::string(buf);
  std::string kind = wl.job ? "Job" : "Deployment";
  wl.uid = DeterministicUid(kind + "/" + wl.name, spec.seed);
  wl.hash = HexDigits(wl.name + "#hash", 10);
  wl.rs_name = wl.name + "-" + wl.hash;
  wl.rs_uid = DeterministicUid("ReplicaSet/" + wl.rs_name, spec.seed);
  int k = std::max(1, spec.nodes_per_workload);
  wl.first_node = w * k;
  wl.nodes = std::min(k, spec.nodes - wl.first_node);
  return wl;
}

int WorkloadCount(const PopulationSpec& spec) {
  if (spec.pods_per_node <= 0 || spec.nodes <= 0) return 0;
  int k = std::max(1, spec.nodes_per_workload);
  return (spec.nodes + k - 1) / k;
}

json Meta(std::string_view name, std::string_view ns, std::string_view uid,
          const PopulationSpec& spec) {
  json m = {{"name", name}, {"uid", uid}, {"creationTimestamp", spec.creation_timestamp}};
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}

json PodTemplate(const Workload& wl, const PopulationSpec& spec) {
  int gpus = spec.pods_per_node > 0 ? spec.gpus_per_node / spec.pods_per_node : 0;
  json res = {{"requests", {{"cpu", "8"}, {"memory", "64Gi"}}}};
  if (gpus > 0) {
    res["requests"]["nvidia.com/gpu"] = std::to_string(gpus);
    res["limits"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
  }
  json labels = {{"app", wl.name}};
  if (!wl.job)
    labels["pod-template-hash"] = wl.hash;
  else
    labels["job-name"] = wl.name;
  return {{"metadata", {{"labels", labels}}},
          {"spec",
           {{"containers",
             {{{"name", wl.job ? "trainer" : "server"},
               {"image", wl.job ? "nvcr.io/nvidia/pytorch:25.01-py3"
                                : "nvcr.io/nvidia/tritonserver:25.01-py3"},
               {"resources", res}}}},
            {"priorityClassName", wl.job ? "gpu-training-batch" : "gpu-inference-high"},
            {"restartPolicy", wl.job ? "OnFailure" : "Always"},
            {"terminationGracePeriodSeconds", 30},
            {"tolerations",
             {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}}}}};
}

json RunningStatus(int node_index, int slot, const PopulationSpec& spec) {
  json conds = json::array();
  for (const char* t :
       {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"})
    conds.push_back({{"type", t},
                     {"status", "True"},
                     {"lastProbeTime", nullptr},
                     {"lastTransitionTime", spec.creation_timestamp}});
  std::string host =
      "10.0." + std::to_string((node_index >> 8) & 0xff) + "." + std::to_string(node_index & 0xff);
  return {{"phase", "Running"},
          {"conditions", conds},
          {"hostIP", host},
          {"podIP", PodIp(node_index, slot)},
          {"podIPs", {{{"ip", PodIp(node_index, slot)}}}},
          {"startTime", spec.creation_timestamp},
          {"qosClass", "Burstable"}};
}

json MakePod(const json& tmpl, std::string_view name, std::string_view ns, const json& owner,
             std::string_view node, int node_index, int slot, const PopulationSpec& spec) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] =
      Meta(name, ns,
           DeterministicUid("Pod/" + std::string(ns) + "/" + std::string(name), spec.seed), spec);
  pod["metadata"]["labels"] = tmpl["metadata"]["labels"];
  pod["metadata"]["ownerReferences"] = json::array({owner});
  pod["spec"] = tmpl["spec"];
  pod["spec"]["nodeName"] = node;
  pod["spec"]["schedulerName"] = "default-scheduler";
  pod["spec"]["serviceAccountName"] = "default";
  pod["status"] = RunningStatus(node_index, slot, spec);
  json cstat = json::array();  // what the kubelet reports: READY n/n in kubectl get pods
  for (const auto& c : pod["spec"]["containers"])
    cstat.push_back({{"name", c.value("name", "")},
                     {"image", c.value("image", "")},
                     {"imageID", ""},
                     {"ready", true},
                     {"started", true},
                     {"restartCount", 0},
                     {"state", {{"running", {{"startedAt", spec.creation_timestamp}}}}}});
  pod["status"]["containerStatuses"] = std::move(cstat);
  AddDefaultTolerationSeconds(pod);  // what the API server's admission gives every pod
  return pod;
}

struct DaemonSetDef {
  const char* name;
  const char* image;
};
constexpr DaemonSetDef kDaemonSets[] = {
    {"nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"},
    {"gpu-guardian-agent", "ghcr.io/gpu-guardian/agent:v0.1.0"},
};

json DaemonSetPodTemplate(const DaemonSetDef& d) {
  return {{"metadata", {{"labels", {{"app.kubernetes.io/name", d.name}}}}},
          {"spec",
           {{"containers",
             {{{"name", d.name},
               {"image", d.image},
               {"resources", {{"requests", {{"cpu", "50m"}, {"memory", "64Mi"}}}}}}}},
            {"priorityClassName", "system-node-critical"},
            {"terminationGracePeriodSeconds", 30},
            {"tolerations", {{{"operator", "Exists"}}}},
            {"volumes",
             {{{"name", "device-plugin"},
               {"hostPath", {{"path", "/var/lib/kubelet/device-plugins"}}}}}}}}};
}

}  // namespace

std::string DeterministicUid(std::string_view key, uint64_t seed) {
  uint64_t a = Fnv(key, 0xcbf29ce484222325ULL ^ (seed * 0x9e3779b97f4a7c15ULL));
  uint64_t b = Fnv(std::string(key) + "#uid", a);
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  std::string h = Hex16(a) + Hex16(b);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
}

std::string FakeGpuUuid(std::string_view node, int index) {
  std::string s = std::string(node) + "/" + std::to_string(index);
  std::string h = Hex16(Fnv(s)) + Hex16(Fnv(s + "~"));
  return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" +
         h.substr(16, 4) + "-" + h.substr(20, 12);
}

int GpuMemoryMiB(std::string_view product) { return InfoFor(product).memory_mib; }

std::string ResourceSliceApiVersion(std::string_view kube_version) {
  return (kube_version == "1.32" || kube_version == "1.33") ? "resource.k8s.io/v1beta1"
                                                            : "resource.k8s.io/v1";
}

namespace {

// The labels GPU feature discovery and NFD put on a GPU node.
json GpuNodeLabels(const GpuInfo& info, const std::string& n, const std::string& zone, int gpus,
                   std::string_view product) {
  json labels = {{"beta.kubernetes.io/arch", "amd64"},
                 {"beta.kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"kubernetes.io/hostname", n},
                 {"kubernetes.io/os", "linux"},
                 {"node.kubernetes.io/instance-type", info.instance_type},
                 {"topology.kubernetes.io/region", "us-east-1"},
                 {"topology.kubernetes.io/zone", zone},
                 {"feature.node.kubernetes.io/cpu-cpuid.AVX512F", "true"},
                 {"feature.node.kubernetes.io/cpu-cpuid.AMXTILE", "true"},
                 {"feature.node.kubernetes.io/cpu-hardware_multithreading", "true"},
                 {"feature.node.kubernetes.io/kernel-version.full", "6.8.0-1021-aws"},
                 {"feature.node.kubernetes.io/kernel-version.major", "6"},
                 {"feature.node.kubernetes.io/kernel-version.minor", "8"},
                 {"feature.node.kubernetes.io/kernel-version.revision", "0"},
                 {"feature.node.kubernetes.io/pci-10de.present", "true"},
                 {"feature.node.kubernetes.io/pci-15b3.present", "true"},
                 {"feature.node.kubernetes.io/system-os_release.ID", "ubuntu"},
                 {"feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04"},
                 {"feature.node.kubernetes.io/system-os_release.VERSION_ID.major", "22"},
                 {"feature.node.kubernetes.io/system-os_release.VERSION_ID.minor", "04"},
                 {"nvidia.com/cuda.driver-version.full", "570.124.06"},
                 {"nvidia.com/cuda.driver.major", "570"},
                 {"nvidia.com/cuda.driver.minor", "124"},
                 {"nvidia.com/cuda.driver.rev", "06"},
                 {"nvidia.com/cuda.runtime.major", "12"},
                 {"nvidia.com/cuda.runtime.minor", "8"},
                 {"nvidia.com/gfd.timestamp", "1767225600"},
                 {"nvidia.com/gpu.compute.major", std::to_string(info.major)},
                 {"nvidia.com/gpu.compute.minor", std::to_string(info.minor)},
                 {"nvidia.com/gpu.count", std::to_string(gpus)},
                 {"nvidia.com/gpu.deploy.container-toolkit", "true"},
                 {"nvidia.com/gpu.deploy.dcgm", "true"},
                 {"nvidia.com/gpu.deploy.dcgm-exporter", "true"},
                 {"nvidia.com/gpu.deploy.device-plugin", "true"},
                 {"nvidia.com/gpu.deploy.driver", "pre-installed"},
                 {"nvidia.com/gpu.deploy.gpu-feature-discovery", "true"},
                 {"nvidia.com/gpu.deploy.node-status-exporter", "true"},
                 {"nvidia.com/gpu.deploy.operator-validator", "true"},
                 {"nvidia.com/gpu.family", info.family},
                 {"nvidia.com/gpu.machine", "Amazon-EC2"},
                 {"nvidia.com/gpu.memory", std::to_string(info.memory_mib)},
                 {"nvidia.com/gpu.present", "true"},
                 {"nvidia.com/gpu.product", product},
                 {"nvidia.com/gpu.replicas", "1"},
                 {"nvidia.com/gpu.sharing-strategy", "none"},
                 {"nvidia.com/mig.capable", info.major >= 8 ? "true" : "false"},
                 {"nvidia.com/mig.strategy", "single"},
                 {"nvidia.com/mps.capable", "false"}};
  return labels;
}

// What NFD records in nfd.node.kubernetes.io/feature-labels.
std::string FeatureLabels(const json& labels) {
  std::string feature_labels;
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    std::string k = it.key();
    if (k.rfind("feature.node.kubernetes.io/", 0) == 0)
      k = k.substr(27);
    else if (k.rfind("nvidia.com/", 0) != 0)
      continue;
    feature_labels += (feature_labels.empty() ? "" : ",") + k;
  }
  return feature_labels;
}

json NodeConditions(const PopulationSpec& spec) {
  json conds = json::array();
  static const char* const kConditions[][4] = {
      {"MemoryPressure", "False", "KubeletHasSufficientMemory",
       "kubelet has sufficient memory available"},
      {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
      {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
      {"Ready", "True", "KubeletReady", "kubelet is posting ready status"}};
  for (const auto& c : kConditions)
    conds.push_back({{"type", c[0]},
                     {"status", c[1]},
                     {"reason", c[2]},
                     {"message", c[3]},
                     {"lastHeartbeatTime", spec.creation_timestamp},
                     {"lastTransitionTime", spec.creation_timestamp}});
  return conds;
}

json NodeImages() {
  json images = json::array();
  static const char* const kImages[] = {
      "nvcr.io/nvidia/pytorch",
      "nvcr.io/nvidia/tritonserver",
      "nvcr.io/nvidia/nemo",
      "nvcr.io/nvidia/tensorrt",
      "nvcr.io/nvidia/cuda",
      "nvcr.io/nvidia/k8s-device-plugin",
      "nvcr.io/nvidia/gpu-feature-discovery",
      "nvcr.io/nvidia/k8s/dcgm-exporter",
      "nvcr.io/nvidia/gpu-operator",
      "nvcr.io/nvidia/k8s/container-toolkit",
      "nvcr.io/nvidia/cloud-native/gpu-operator-validator",
      "nvcr.io/nvidia/driver",
      "registry.k8s.io/kube-proxy",
      "registry.k8s.io/pause",
      "registry.k8s.io/coredns/coredns",
      "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni",
      "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni-init",
      "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-ebs-csi-driver",
      "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/csi-node-driver-registrar",
      "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/livenessprobe",
      "public.ecr.aws/efa-device-plugin/efa-k8s-device-plugin",
      "registry.k8s.io/nfd/node-feature-discovery",
      "quay.io/prometheus/node-exporter",
      "docker.io/fluent/fluent-bit",
      "ghcr.io/gpu-guardian/agent",
      "docker.io/library/busybox",
      "nvcr.io/nvidia/cloud-native/k8s-mig-manager",
      "nvcr.io/nvidia/cloud-native/dcgm",
      "nvcr.io/nvidia/cloud-native/k8s-kata-manager",
      "nvcr.io/nvidia/cloud-native/vgpu-device-manager"};
  int i = 0;
  for (const char* img : kImages) {
    std::string tag = "v" + std::to_string(1 + i % 5) + "." + std::to_string(i % 7) + ".0";
    std::string digest = HexDigits(std::string(img) + tag, 64);
    images.push_back(
        {{"names", {std::string(img) + "@sha256:" + digest, std::string(img) + ":" + tag}},
         {"sizeBytes", 20000000LL + static_cast<int64_t>(Fnv(img) % 12000000000ULL)}});
    ++i;
  }
  return images;
}

json NodeStatus(const PopulationSpec& spec, const std::string& n, const std::string& host_ip,
                int gpus) {
  std::string g = std::to_string(gpus);
  json capacity = {{"cpu", "192"},
                   {"ephemeral-storage", "3750000000Ki"},
                   {"hugepages-1Gi", "0"},
                   {"hugepages-2Mi", "0"},
                   {"memory", "2097152000Ki"},
                   {"nvidia.com/gpu", g},
                   {"pods", "110"},
                   {"vpc.amazonaws.com/efa", "32"}};
  json allocatable = capacity;
  allocatable["cpu"] = "191450m";
  allocatable["ephemeral-storage"] = "3455716022637";
  allocatable["memory"] = "2085521408Ki";
  json conds = NodeConditions(spec);
  json images = NodeImages();
  json status = {{"addresses",
                  {{{"type", "InternalIP"}, {"address", host_ip}},
                   {{"type", "InternalDNS"}, {"address", "ip-" + host_ip + ".ec2.internal"}},
                   {{"type", "Hostname"}, {"address", n}}}},
                 {"allocatable", allocatable},
                 {"capacity", capacity},
                 {"conditions", conds},
                 {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", 10250}}}}},
                 {"images", images},
                 {"nodeInfo",
                  {{"architecture", "amd64"},
                   {"bootID", DeterministicUid(n + "#boot", spec.seed)},
                   {"containerRuntimeVersion", "containerd://1.7.27"},
                   {"kernelVersion", "6.8.0-1021-aws"},
                   {"kubeProxyVersion", ""},
                   {"kubeletVersion", KubeletVersion(spec.kube_version)},
                   {"machineID", HexDigits(n + "#machine", 32)},
                   {"operatingSystem", "linux"},
                   {"osImage", "Ubuntu 22.04.5 LTS"},
                   {"systemUUID", DeterministicUid(n + "#system", spec.seed)}}}};
  return status;
}

json NodeManagedFields(const PopulationSpec& spec, const json& labels) {
  auto mf = [&](const char* manager, const char* op, const char* sub, json fields) {
    json e = {{"apiVersion", "v1"}, {"fieldsType", "FieldsV1"}, {"fieldsV1", fields},
              {"manager", manager}, {"operation", op},          {"time", spec.creation_timestamp}};
    if (sub[0]) e["subresource"] = sub;
    return e;
  };
  json label_fields = json::object();
  for (auto it = labels.begin(); it != labels.end(); ++it)
    if (it.key().rfind("nvidia.com/", 0) == 0) label_fields["f:" + it.key()] = json::object();
  return json::array(
      {mf("kubelet", "Update", "",
          {{"f:metadata",
            {{"f:annotations", {{"f:node.alpha.kubernetes.io/ttl", json::object()}}},
             {"f:labels", {{"f:kubernetes.io/hostname", json::object()}}}}}}),
       mf("kube-controller-manager", "Update", "",
          {{"f:spec", {{"f:podCIDR", json::object()}, {"f:podCIDRs", json::object()}}}}),
       mf("nfd-worker", "Update", "", {{"f:metadata", {{"f:labels", label_fields}}}}),
       mf("kubelet", "Update", "status",
          {{"f:status",
            {{"f:allocatable", {{"f:nvidia.com/gpu", json::object()}}},
             {"f:capacity", {{"f:nvidia.com/gpu", json::object()}}},
             {"f:conditions", json::object()},
             {"f:images", json::object()},
             {"f:nodeInfo", json::object()}}}})});
}

}  // namespace

json MakeGpuNode(const PopulationSpec& spec, int index, std::string_view name, int gpus,
                 std::string_view product, const std::map<std::string, std::string>& extra_labels,
                 const json& taints) {
  GpuInfo info = InfoFor(product);
  std::string n(name);
  std::string zone = std::string("us-east-1") + static_cast<char>('a' + index % 4);
  json labels = GpuNodeLabels(info, n, zone, gpus, product);
  for (const auto& [k, v] : spec.extra_node_labels) labels[k] = v;
  for (const auto& [k, v] : extra_labels) labels[k] = v;
  std::string host_ip =
      "10.0." + std::to_string((index >> 8) & 0xff) + "." + std::to_string(index & 0xff);
  json node = {{"apiVersion", "v1"}, {"kind", "Node"}};
  node["metadata"] = Meta(n, "", DeterministicUid("Node/" + n, spec.seed), spec);
  node["metadata"]["labels"] = labels;
  node["metadata"]["annotations"] = {
      {"csi.volume.kubernetes.io/nodeid",
       "{\"ebs.csi.aws.com\":\"i-" + HexDigits(n + "#i", 17) + "\"}"},
      {"nfd.node.kubernetes.io/feature-labels", FeatureLabels(labels)},
      {"nfd.node.kubernetes.io/worker.version", "v0.16.6"},
      {"node.alpha.kubernetes.io/ttl", "0"},
      {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}};
  std::string cidr = PodCidr(index);
  node["spec"] = {{"podCIDR", cidr},
                  {"podCIDRs", {cidr}},
                  {"providerID", "aws:///" + zone + "/i-" + HexDigits(n + "#i", 17)}};
  if (taints.is_array() && !taints.empty()) node["spec"]["taints"] = taints;
  node["status"] = NodeStatus(spec, n, host_ip, gpus);
  node["metadata"]["managedFields"] = NodeManagedFields(spec, labels);
  return node;
}

std::string FakeMigUuid(std::string_view gpu_uuid, uint32_t gi, uint32_t ci) {
  std::string_view body = gpu_uuid;
  if (body.starts_with("GPU-")) body.remove_prefix(4);
  char ids[5];
  std::snprintf(ids, sizeof ids, "%02x%02x", gi & 0xFFu, ci & 0xFFu);
  std::string keep(body.substr(0, body.size() >= 4 ? body.size() - 4 : body.size()));
  return "MIG-" + keep + ids;
}

std::vector<MigSlot> MigLayout(std::string_view product, int devices) {
  const int mib = InfoFor(product).memory_mib;
  const int gb = (mib / 8 + 512) / 1024;  // a 1g instance holds 1/8 of the memory
  std::vector<MigSlot> out;
  for (int i = 0; i < std::clamp(devices, 0, 7); ++i) {
    out.push_back({static_cast<uint32_t>(i + 1), 0, i, "1g." + std::to_string(gb) + "gb", mib / 8});
  }
  return out;
}

namespace {

constexpr int kMig1gProfileId = 19;  // NVML GPU-instance profile id of a 1g instance

json GpuAttributes(std::string_view product, const GpuInfo& info) {
  return {{"productName", {{"string", product}}},
          {"brand", {{"string", "Nvidia"}}},
          {"architecture", {{"string", info.family}}},
          {"cudaComputeCapability",
           {{"version", std::to_string(info.major) + "." + std::to_string(info.minor) + ".0"}}},
          {"driverVersion", {{"version", "570.124.6"}}}};
}

json SliceDevice(std::string name, json attrs, json cap, bool beta1) {
  json dev = {{"name", std::move(name)}};
  if (beta1) {
    dev["basic"] = {{"attributes", std::move(attrs)}, {"capacity", std::move(cap)}};
  } else {
    dev["attributes"] = std::move(attrs);
    dev["capacity"] = std::move(cap);
  }
  return dev;
}

// The MIG devices of GPU `i` (see MakeResourceSlice).
void AddMigDevices(json& devices, std::string_view node, int i, std::string_view product, int mig,
                   bool beta1) {
  const GpuInfo info = InfoFor(product);
  const std::string parent = FakeGpuUuid(node, i);
  for (const auto& m : MigLayout(product, mig)) {
    json attrs = GpuAttributes(product, info);
    attrs["type"] = {{"string", "mig"}};
    attrs["uuid"] = {{"string", FakeMigUuid(parent, m.gpu_instance, m.compute_instance)}};
    attrs["parentUUID"] = {{"string", parent}};
    attrs["profile"] = {{"string", m.profile}};
    json cap = {{"memory", {{"value", std::to_string(m.memory_mib) + "Mi"}}},
                {"memorySlice" + std::to_string(m.start), {{"value", "1"}}}};
    std::string name = "gpu-" + std::to_string(i) + "-mig-" + std::to_string(kMig1gProfileId) +
                       "-" + std::to_string(m.start) + "-1";
    devices.push_back(SliceDevice(std::move(name), std::move(attrs), std::move(cap), beta1));
  }
}

}  // namespace

Status AddDriverTaint(json& slice, const DriverTaintSpec& t, std::string_view kube_version) {
  if (kube_version < std::string_view("1.33"))
    return InvalidArgumentError("driver taint: Kubernetes " + std::string(kube_version) +
                                " serves no device taints in ResourceSlices (1.33+)");
  if (t.effect != "NoSchedule" && t.effect != "NoExecute" &&
      !(t.effect == "None" && kube_version >= std::string_view("1.35")))
    return InvalidArgumentError("driver taint: effect \"" + t.effect + "\" is not a device " +
                                "taint effect of Kubernetes " + std::string(kube_version));
  const bool beta1 = slice.value("apiVersion", "") == "resource.k8s.io/v1beta1";
  json taint = {{"key", t.key}, {"effect", t.effect}};
  if (!t.value.empty()) taint["value"] = t.value;
  if (!t.time_added.empty()) taint["timeAdded"] = t.time_added;
  for (auto& d : slice["spec"]["devices"]) {
    if (d.value("name", "") != t.device) continue;
    json& where = beta1 ? d["basic"] : d;
    if (!where.contains("taints")) where["taints"] = json::array();
    where["taints"].push_back(std::move(taint));
    return OkStatus();
  }
  return InvalidArgumentError("driver taint: no device \"" + t.device + "\" in ResourceSlice " +
                              slice["metadata"].value("name", ""));
}

json MakeResourceSlice(std::string_view node, int gpus, std::string_view product,
                       std::string_view kube_version, uint64_t seed, int mig_devices_per_gpu) {
  std::string api = ResourceSliceApiVersion(kube_version);
  bool beta1 = api == "resource.k8s.io/v1beta1";
  GpuInfo info = InfoFor(product);
  json devices = json::array();
  for (int i = 0; i < gpus; ++i) {
    if (mig_devices_per_gpu > 0) {
      AddMigDevices(devices, node, i, product, mig_devices_per_gpu, beta1);
      continue;
    }
    json attrs = GpuAttributes(product, info);
    attrs["uuid"] = {{"string", FakeGpuUuid(node, i)}};
    attrs["index"] = {{"int", i}};
    attrs["type"] = {{"string", "gpu"}};
    json cap = {{"memory", {{"value", std::to_string(info.memory_mib) + "Mi"}}}};
    devices.push_back(
        SliceDevice("gpu-" + std::to_string(i), std::move(attrs), std::move(cap), beta1));
  }
  std::string n(node);
  std::string name = n + "-gpu.nvidia.com-" + Suffix(n + "#slice", seed);
  json s = {{"apiVersion", api}, {"kind", "ResourceSlice"}};
  s["metadata"] = {
      {"name", name},
      {"uid", DeterministicUid("ResourceSlice/" + name, seed)},
      {"ownerReferences", {OwnerRef("v1", "Node", n, DeterministicUid("Node/" + n, seed), false)}}};
  s["spec"] = {{"driver", "gpu.nvidia.com"},
               {"nodeName", n},
               {"pool", {{"name", n}, {"generation", 1}, {"resourceSliceCount", 1}}},
               {"devices", devices}};
  return s;
}

PopulationCounts CountPopulation(const PopulationSpec& spec) {
  PopulationCounts c;
  int w = WorkloadCount(spec);
  c.namespaces = 2;
  c.priorityclasses = 2;
  c.daemonsets = spec.daemonset_pods ? 2 : 0;
  for (int i = 0; i < w; ++i) {
    Workload wl = WorkloadFor(spec, i);
    if (wl.job)
      ++c.jobs;
    else
      ++c.deployments, ++c.replicasets, c.pdbs += spec.pdbs ? 1 : 0;
  }
  c.nodes = std::max(0, spec.nodes);
  c.pods = c.nodes * (std::max(0, spec.pods_per_node) + (spec.daemonset_pods ? 2 : 0));
  c.resourceslices = spec.dra ? c.nodes : 0;
  return c;
}

namespace {

// Namespaces, PriorityClasses and the DaemonSets (their uids into *ds_uids).
Status EmitClusterObjects(const PopulationSpec& spec, const ObjectSink& sink,
                          std::vector<std::string>* ds_uids) {
  for (const std::string& ns : {spec.workload_namespace, spec.system_namespace}) {
    json o = {{"apiVersion", "v1"},
              {"kind", "Namespace"},
              {"metadata", Meta(ns, "", DeterministicUid("Namespace/" + ns, spec.seed), spec)},
              {"spec", {{"finalizers", {"kubernetes"}}}},
              {"status", {{"phase", "Active"}}}};
    GG_RETURN_IF_ERROR(sink(std::move(o)));
  }
  for (auto [name, value] :
       {std::pair<const char*, int>{"gpu-inference-high", 1000000}, {"gpu-training-batch", 1000}}) {
    json pc = {
        {"apiVersion", "scheduling.k8s.io/v1"},
        {"kind", "PriorityClass"},
        {"metadata",
         Meta(name, "", DeterministicUid(std::string("PriorityClass/") + name, spec.seed), spec)},
        {"value", value},
        {"preemptionPolicy", "PreemptLowerPriority"},
        {"globalDefault", false}};
    GG_RETURN_IF_ERROR(sink(std::move(pc)));
  }
  if (spec.daemonset_pods) {
    for (const auto& d : kDaemonSets) {
      std::string uid = DeterministicUid(std::string("DaemonSet/") + d.name, spec.seed);
      ds_uids->push_back(uid);
      json ds = {{"apiVersion", "apps/v1"}, {"kind", "DaemonSet"}};
      ds["metadata"] = Meta(d.name, spec.system_namespace, uid, spec);
      ds["metadata"]["generation"] = 1;
      ds["spec"] = {{"selector", {{"matchLabels", {{"app.kubernetes.io/name", d.name}}}}},
                    {"template", DaemonSetPodTemplate(d)}};
      ds["status"] = {{"currentNumberScheduled", spec.nodes},
                      {"desiredNumberScheduled", spec.nodes},
                      {"numberAvailable", spec.nodes},
                      {"numberReady", spec.nodes},
                      {"numberMisscheduled", 0},
                      {"observedGeneration", 1},
                      {"updatedNumberScheduled", spec.nodes}};
      GG_RETURN_IF_ERROR(sink(std::move(ds)));
    }
  }
  return OkStatus();
}

// The PDB of Deployment `wl` (w: the workload index; alternates maxUnavailable / minAvailable).
json MakePdb(const PopulationSpec& spec, const Workload& wl, int w, int replicas,
             const std::string& ns) {
  json pdb = {{"apiVersion", "policy/v1"}, {"kind", "PodDisruptionBudget"}};
  pdb["metadata"] = Meta(wl.name + "-pdb", ns,
                         DeterministicUid("PodDisruptionBudget/" + wl.name, spec.seed), spec);
  pdb["metadata"]["generation"] = 1;
  pdb["spec"] = {{"selector", {{"matchLabels", {{"app", wl.name}}}}}};
  int desired;
  if ((w / 2) % 2 == 0) {
    pdb["spec"]["maxUnavailable"] = 1;
    desired = std::max(0, replicas - 1);
  } else {
    pdb["spec"]["minAvailable"] = "50%";
    desired = (replicas * 50 + 99) / 100;
  }
  int allowed = std::max(0, replicas - desired);
  pdb["status"] = {{"currentHealthy", replicas},
                   {"desiredHealthy", desired},
                   {"expectedPods", replicas},
                   {"disruptionsAllowed", allowed},
                   {"observedGeneration", 1},
                   {"conditions",
                    {{{"type", "DisruptionAllowed"},
                      {"status", allowed > 0 ? "True" : "False"},
                      {"reason", allowed > 0 ? "SufficientPods" : "InsufficientPods"},
                      {"message", ""},
                      {"observedGeneration", 1},
                      {"lastTransitionTime", spec.creation_timestamp}}}}};
  return pdb;
}

// A Job, or a Deployment with its ReplicaSet and PDB.
Status EmitWorkload(const PopulationSpec& spec, int w, const ObjectSink& sink) {
  const std::string& ns = spec.workload_namespace;
  Workload wl = WorkloadFor(spec, w);
  int replicas = wl.nodes * spec.pods_per_node;
  json tmpl = PodTemplate(wl, spec);
  if (wl.job) {
    json job = {{"apiVersion", "batch/v1"}, {"kind", "Job"}};
    job["metadata"] = Meta(wl.name, ns, wl.uid, spec);
    job["metadata"]["generation"] = 1;
    job["spec"] = {
        {"parallelism", replicas},
        {"completions", replicas},
        {"backoffLimit", 6},
        {"selector", {{"matchLabels", {{"batch.kubernetes.io/controller-uid", wl.uid}}}}},
        {"template", tmpl}};
    job["status"] = {{"active", replicas}, {"startTime", spec.creation_timestamp}};
    GG_RETURN_IF_ERROR(sink(std::move(job)));
    return OkStatus();
  }
  json dep = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}};
  dep["metadata"] = Meta(wl.name, ns, wl.uid, spec);
  dep["metadata"]["generation"] = 1;
  dep["spec"] = {{"replicas", replicas},
                 {"selector", {{"matchLabels", {{"app", wl.name}}}}},
                 {"template", tmpl},
                 {"strategy", {{"type", "RollingUpdate"}}}};
  dep["status"] = {{"replicas", replicas},
                   {"readyReplicas", replicas},
                   {"availableReplicas", replicas},
                   {"updatedReplicas", replicas},
                   {"observedGeneration", 1}};
  GG_RETURN_IF_ERROR(sink(std::move(dep)));
  json rs = {{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}};
  rs["metadata"] = Meta(wl.rs_name, ns, wl.rs_uid, spec);
  rs["metadata"]["generation"] = 1;
  rs["metadata"]["labels"] = tmpl["metadata"]["labels"];
  rs["metadata"]["ownerReferences"] = {OwnerRef("apps/v1", "Deployment", wl.name, wl.uid)};
  rs["spec"] = {{"replicas", replicas},
                {"selector", {{"matchLabels", {{"app", wl.name}, {"pod-template-hash", wl.hash}}}}},
                {"template", tmpl}};
  rs["status"] = {{"replicas", replicas},
                  {"readyReplicas", replicas},
                  {"availableReplicas", replicas},
                  {"fullyLabeledReplicas", replicas},
                  {"observedGeneration", 1}};
  GG_RETURN_IF_ERROR(sink(std::move(rs)));
  if (spec.pdbs) GG_RETURN_IF_ERROR(sink(MakePdb(spec, wl, w, replicas, ns)));
  return OkStatus();
}

std::vector<json> DaemonSetPodTemplates() {
  std::vector<json> ds_templates;
  for (const auto& d : kDaemonSets) {
    // The pods carry the labels the DaemonSet controller gives its pods, so they count as
    // up to date rather than being rolled: the revision hash of the template as the API
    // server stores it (with its pod defaults) and the preloaded DaemonSet's generation.
    json t = DaemonSetPodTemplate(d);
    json stored = t;
    SetPodSpecDefaults(stored["spec"], false);
    t["metadata"]["labels"]["controller-revision-hash"] = PodTemplateHash(stored);
    t["metadata"]["labels"]["pod-template-generation"] = "1";
    ds_templates.push_back(std::move(t));
  }
  return ds_templates;
}

// Node `i`, its DaemonSet and workload pods, its ResourceSlice.
Status EmitNode(const PopulationSpec& spec, int i, const std::vector<std::string>& ds_uids,
                const std::vector<json>& ds_templates, const ObjectSink& sink) {
  const std::string& ns = spec.workload_namespace;
  int k = std::max(1, spec.nodes_per_workload);
  std::string node = NodeName(spec, i);
  GG_RETURN_IF_ERROR(sink(MakeGpuNode(spec, i, node, spec.gpus_per_node, spec.gpu_product)));
  int slot = 0;
  if (spec.daemonset_pods) {
    for (size_t d = 0; d < std::size(kDaemonSets); ++d) {
      std::string pname = std::string(kDaemonSets[d].name) + "-" +
                          UniqueSuffix(static_cast<uint64_t>(i), spec.seed + d);
      json owner = OwnerRef("apps/v1", "DaemonSet", kDaemonSets[d].name, ds_uids[d]);
      GG_RETURN_IF_ERROR(sink(
          MakePod(ds_templates[d], pname, spec.system_namespace, owner, node, i, slot++, spec)));
    }
  }
  if (spec.pods_per_node > 0) {
    Workload wl = WorkloadFor(spec, i / k);
    json tmpl = PodTemplate(wl, spec);
    json owner = wl.job ? OwnerRef("batch/v1", "Job", wl.name, wl.uid)
                        : OwnerRef("apps/v1", "ReplicaSet", wl.rs_name, wl.rs_uid);
    if (wl.job) tmpl["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = wl.uid;
    for (int p = 0; p < spec.pods_per_node; ++p) {
      std::string base = wl.job ? wl.name : wl.rs_name;
      std::string pname =
          base + "-" +
          UniqueSuffix(static_cast<uint64_t>(i) * 128 + static_cast<uint64_t>(p), spec.seed);
      GG_RETURN_IF_ERROR(sink(MakePod(tmpl, pname, ns, owner, node, i, slot++, spec)));
    }
  }
  if (spec.dra && spec.gpus_per_node > 0) {
    json slice = MakeResourceSlice(node, spec.gpus_per_node, spec.gpu_product, spec.kube_version,
                                   spec.seed, spec.mig_devices_per_gpu);
    for (const auto& t : spec.driver_taints) {
      if (t.node == i) GG_RETURN_IF_ERROR(AddDriverTaint(slice, t, spec.kube_version));
    }
    GG_RETURN_IF_ERROR(sink(std::move(slice)));
  }
  return OkStatus();
}

}  // namespace

Status GeneratePopulation(const PopulationSpec& spec, const ObjectSink& sink) {
  if (spec.nodes < 0 || spec.gpus_per_node < 0 || spec.pods_per_node < 0)
    return InvalidArgumentError("population: counts must not be negative");
  if (spec.gpus_per_node > 64)
    return InvalidArgumentError("population: gpus_per_node must be <= 64");
  if (spec.pods_per_node > 110)
    return InvalidArgumentError("population: pods_per_node must be <= 110 (node pod capacity)");
  if (spec.nodes > 10'000'000) return InvalidArgumentError("population: too many nodes");
  if (!sink) return InvalidArgumentError("population: no sink");
  if (spec.mig_devices_per_gpu < 0 || spec.mig_devices_per_gpu > 7)
    return InvalidArgumentError("population: mig_devices_per_gpu must be 0..7");
  std::vector<std::string> ds_uids;
  GG_RETURN_IF_ERROR(EmitClusterObjects(spec, sink, &ds_uids));
  for (int w = 0; w < WorkloadCount(spec); ++w) GG_RETURN_IF_ERROR(EmitWorkload(spec, w, sink));
  const std::vector<json> ds_templates = DaemonSetPodTemplates();
  for (int i = 0; i < spec.nodes; ++i)
    GG_RETURN_IF_ERROR(EmitNode(spec, i, ds_uids, ds_templates, sink));
  return OkStatus();
}

}  // namespace gg::sim
