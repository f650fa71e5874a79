// Scenario files (YAML) → validated description → the objects of an explicit cluster.
#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sim/admission.h"
#include "sim/controllers.h"
#include "sim/pdb.h"
#include "sim/rbac.h"  // ParseYamlDocuments
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;

namespace {

Status Err(const YAML::Node& n, const std::string& msg) {
  return InvalidArgumentError("scenario line " + std::to_string(n.Mark().line + 1) + ": " + msg);
}

Status CheckKeys(const YAML::Node& map, const std::set<std::string>& allowed,
                 const std::string& where) {
  if (!map.IsMap()) return Err(map, where + " must be a mapping");
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return Err(kv.first, "keys must be scalars");
    if (!allowed.count(kv.first.Scalar()))
      return Err(kv.first, "unknown field \"" + kv.first.Scalar() + "\" in " + where);
  }
  return OkStatus();
}

Status CheckInt(const YAML::Node& map, const char* key, long long lo, long long hi,
                const std::string& where) {
  YAML::Node v = map[key];
  if (!v) return OkStatus();
  long long x = 0;
  try {
    if (!v.IsScalar()) throw YAML::BadConversion(v.Mark());
    x = v.as<long long>();
  } catch (const YAML::Exception&) {
    return Err(v, where + "." + key + " must be an integer");
  }
  if (x < lo || x > hi)
    return Err(v, where + "." + key + " must be between " + std::to_string(lo) + " and " +
                      std::to_string(hi));
  return OkStatus();
}

Status CheckString(const YAML::Node& map, const char* key, bool required,
                   const std::string& where) {
  YAML::Node v = map[key];
  if (!v) return required ? Err(map, where + "." + key + " is required") : OkStatus();
  if (!v.IsScalar() || v.Scalar().empty())
    return Err(v, where + "." + key + " must be a non-empty string");
  return OkStatus();
}

Status CheckStringMap(const YAML::Node& map, const char* key, const std::string& where) {
  YAML::Node v = map[key];
  if (!v) return OkStatus();
  if (!v.IsMap()) return Err(v, where + "." + key + " must be a mapping of strings");
  for (const auto& kv : v) {
    if (!kv.second.IsScalar()) return Err(kv.second, where + "." + key + " values must be strings");
    auto k = IsQualifiedName(kv.first.Scalar());
    if (!k.empty()) return Err(kv.first, "label key \"" + kv.first.Scalar() + "\": " + k[0]);
    auto e = IsValidLabelValue(kv.second.Scalar());
    if (!e.empty()) return Err(kv.second, "label value \"" + kv.second.Scalar() + "\": " + e[0]);
  }
  return OkStatus();
}

Status CheckName(const YAML::Node& map, const std::string& where) {
  GG_RETURN_IF_ERROR(CheckString(map, "name", true, where));
  auto e = IsDns1123Subdomain(map["name"].Scalar());
  if (!e.empty())
    return Err(map["name"], where + ".name \"" + map["name"].Scalar() + "\": " + e[0]);
  return OkStatus();
}

Status ValidateHeader(const YAML::Node& root) {
  GG_RETURN_IF_ERROR(
      CheckKeys(root, {"kubeVersion", "dra", "seed", "population", "nodes", "workloads", "objects"},
                "scenario"));
  if (YAML::Node kv = root["kubeVersion"]) {
    static const std::set<std::string> kVersions = {"1.32", "1.33", "1.34", "1.35", "1.36"};
    if (!kv.IsScalar() || !kVersions.count(kv.Scalar()))
      return Err(kv, "kubeVersion must be one of 1.32, 1.33, 1.34, 1.35, 1.36");
  }
  if (YAML::Node d = root["dra"]) {
    try {
      (void)d.as<bool>();
    } catch (const YAML::Exception&) {
      return Err(d, "dra must be true or false");
    }
  }
  GG_RETURN_IF_ERROR(CheckInt(root, "seed", 0, INT64_MAX, "scenario"));
  if (YAML::Node p = root["population"]) {
    GG_RETURN_IF_ERROR(CheckKeys(p,
                                 {"nodes", "gpusPerNode", "podsPerNode", "gpuProduct", "nodePrefix",
                                  "nodesPerWorkload", "pdbs", "daemonSetPods"},
                                 "population"));
    GG_RETURN_IF_ERROR(CheckInt(p, "nodes", 0, 1000000, "population"));
    GG_RETURN_IF_ERROR(CheckInt(p, "gpusPerNode", 0, 64, "population"));
    GG_RETURN_IF_ERROR(CheckInt(p, "podsPerNode", 0, 110, "population"));
    GG_RETURN_IF_ERROR(CheckInt(p, "nodesPerWorkload", 1, 100000, "population"));
  }
  return OkStatus();
}

// Taints the DRA driver publishes on devices of the node's slice (AddDriverTaint checks the
// release and the device name when the slice is emitted).
Status ValidateDriverTaints(const YAML::Node& t) {
  if (!t.IsSequence()) return Err(t, "node.driverTaints must be a list");
  for (const auto& taint : t) {
    GG_RETURN_IF_ERROR(CheckKeys(taint, {"device", "key", "value", "effect"}, "driverTaint"));
    GG_RETURN_IF_ERROR(CheckString(taint, "device", true, "driverTaint"));
    GG_RETURN_IF_ERROR(CheckString(taint, "key", false, "driverTaint"));
    GG_RETURN_IF_ERROR(CheckString(taint, "value", false, "driverTaint"));
    GG_RETURN_IF_ERROR(CheckString(taint, "effect", false, "driverTaint"));
  }
  return OkStatus();
}

Status ValidateTaints(const YAML::Node& t) {
  if (!t.IsSequence()) return Err(t, "node.taints must be a list");
  for (const auto& taint : t) {
    GG_RETURN_IF_ERROR(CheckKeys(taint, {"key", "value", "effect"}, "taint"));
    GG_RETURN_IF_ERROR(CheckString(taint, "key", true, "taint"));
    GG_RETURN_IF_ERROR(CheckString(taint, "effect", true, "taint"));
    std::string e = taint["effect"].Scalar();
    if (e != "NoSchedule" && e != "PreferNoSchedule" && e != "NoExecute")
      return Err(taint["effect"], "taint.effect must be NoSchedule, PreferNoSchedule or NoExecute");
  }
  return OkStatus();
}

// The nodes list; `node_names` gets every node name it expands to.
Status ValidateNodes(const YAML::Node& nodes, std::set<std::string>& node_names) {
  if (!nodes.IsSequence()) return Err(nodes, "nodes must be a list");
  for (const auto& n : nodes) {
    GG_RETURN_IF_ERROR(CheckKeys(
        n,
        {"name", "gpus", "product", "labels", "taints", "unschedulable", "count", "driverTaints"},
        "node"));
    GG_RETURN_IF_ERROR(CheckName(n, "node"));
    GG_RETURN_IF_ERROR(CheckInt(n, "gpus", 0, 64, "node"));
    GG_RETURN_IF_ERROR(CheckInt(n, "count", 1, 100000, "node"));
    GG_RETURN_IF_ERROR(CheckString(n, "product", false, "node"));
    GG_RETURN_IF_ERROR(CheckStringMap(n, "labels", "node"));
    if (YAML::Node t = n["taints"]) GG_RETURN_IF_ERROR(ValidateTaints(t));
    if (YAML::Node t = n["driverTaints"]) GG_RETURN_IF_ERROR(ValidateDriverTaints(t));
    std::string name = n["name"].Scalar();
    if (YAML::Node c = n["count"]) {
      for (long long i = 0; i < c.as<long long>(); ++i)
        node_names.insert(name + "-" + std::to_string(i));
    } else if (!node_names.insert(name).second) {
      return Err(n["name"], "duplicate node \"" + name + "\"");
    }
  }
  return OkStatus();
}

// One workload; `names` holds the namespace/name of those before it.
Status ValidateWorkload(const YAML::Node& w, std::set<std::string>& names,
                        const std::set<std::string>& node_names) {
  GG_RETURN_IF_ERROR(CheckKeys(w,
                               {"name", "kind", "namespace", "replicas", "gpus",
                                "priorityClassName", "priority", "nodes", "labels", "pdb"},
                               "workload"));
  GG_RETURN_IF_ERROR(CheckName(w, "workload"));
  GG_RETURN_IF_ERROR(CheckInt(w, "replicas", 0, 1000000, "workload"));
  GG_RETURN_IF_ERROR(CheckInt(w, "gpus", 0, 64, "workload"));
  GG_RETURN_IF_ERROR(CheckInt(w, "priority", -2147483648LL, 1000000000, "workload"));
  GG_RETURN_IF_ERROR(CheckString(w, "priorityClassName", false, "workload"));
  GG_RETURN_IF_ERROR(CheckStringMap(w, "labels", "workload"));
  if (YAML::Node k = w["kind"]) {
    static const std::set<std::string> kKinds = {"Deployment", "Job", "DaemonSet", "ReplicaSet"};
    if (!k.IsScalar() || !kKinds.count(k.Scalar()))
      return Err(k, "workload.kind must be Deployment, Job, DaemonSet or ReplicaSet");
  }
  if (YAML::Node ns = w["namespace"]) {
    if (!ns.IsScalar() || !IsDns1123Label(ns.Scalar()).empty())
      return Err(ns, "workload.namespace must be a DNS label");
  }
  std::string key = (w["namespace"] ? w["namespace"].Scalar() : "ml") + "/" + w["name"].Scalar();
  if (!names.insert(key).second) return Err(w["name"], "duplicate workload \"" + key + "\"");
  if (YAML::Node ns = w["nodes"]) {
    if (!ns.IsSequence()) return Err(ns, "workload.nodes must be a list of node names");
    for (const auto& n : ns)
      if (!n.IsScalar() || !node_names.count(n.Scalar()))
        return Err(n, "workload.nodes: unknown node \"" +
                          (n.IsScalar() ? n.Scalar() : std::string("?")) + "\"");
  }
  if (YAML::Node p = w["pdb"]) {
    GG_RETURN_IF_ERROR(CheckKeys(p, {"minAvailable", "maxUnavailable"}, "pdb"));
    if (p["minAvailable"] && p["maxUnavailable"])
      return Err(p, "pdb: minAvailable and maxUnavailable cannot be both set");
    if (!p["minAvailable"] && !p["maxUnavailable"])
      return Err(p, "pdb needs minAvailable or maxUnavailable");
  }
  return OkStatus();
}

// A key given twice in one mapping: the checks would read one value and the emitted JSON the
// other, so the file is refused as strict Kubernetes decoding refuses a duplicate field.
Status CheckNoDuplicateKeys(const YAML::Node& n) {
  if (n.IsSequence())
    for (const auto& item : n) GG_RETURN_IF_ERROR(CheckNoDuplicateKeys(item));
  if (!n.IsMap()) return OkStatus();
  std::set<std::string> seen;
  for (const auto& kv : n) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : YAML::Dump(kv.first);
    if (!seen.insert(key).second) return Err(kv.first, "duplicate key \"" + key + "\"");
    GG_RETURN_IF_ERROR(CheckNoDuplicateKeys(kv.second));
  }
  return OkStatus();
}

Status Validate(const YAML::Node& root) {
  GG_RETURN_IF_ERROR(CheckNoDuplicateKeys(root));
  GG_RETURN_IF_ERROR(ValidateHeader(root));
  std::set<std::string> node_names;
  if (YAML::Node nodes = root["nodes"]) GG_RETURN_IF_ERROR(ValidateNodes(nodes, node_names));
  if (YAML::Node ws = root["workloads"]) {
    if (!ws.IsSequence()) return Err(ws, "workloads must be a list");
    std::set<std::string> names;
    for (const auto& w : ws) GG_RETURN_IF_ERROR(ValidateWorkload(w, names, node_names));
  }
  if (YAML::Node objs = root["objects"]) {
    if (!objs.IsSequence()) return Err(objs, "objects must be a list");
    for (const auto& o : objs) {
      if (!o.IsMap() || !o["apiVersion"] || !o["kind"] || !o["metadata"] || !o["metadata"]["name"])
        return Err(o, "objects entries need apiVersion, kind and metadata.name");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<Scenario> ParseScenario(std::string_view yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("scenario: yaml: line " + std::to_string(e.mark.line + 1) +
                                ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (!root || root.IsNull()) return InvalidArgumentError("scenario: empty document");
  try {
    GG_RETURN_IF_ERROR(Validate(root));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("scenario line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  GG_ASSIGN_OR_RETURN(auto docs, ParseYamlDocuments(yaml_text));
  if (docs.empty() || !docs[0].is_object()) return InvalidArgumentError("scenario: empty document");
  Scenario s;
  s.doc = std::move(docs[0]);
  if (s.doc.contains("kubeVersion"))
    s.kube_version = s.doc["kubeVersion"].is_string() ? s.doc["kubeVersion"].get<std::string>()
                                                      : s.doc["kubeVersion"].dump();
  s.dra = s.doc.value("dra", json(false)) == true;
  if (s.doc.contains("seed") && s.doc["seed"].is_number_integer())
    s.seed = s.doc["seed"].get<uint64_t>();
  return s;
}

StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("scenario: cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ParseScenario(ss.str());
  if (!s.ok()) return s.status().WithContext(path);
  return s;
}

namespace {

std::string Str(const json& o, const char* k, std::string def = "") {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : def;
}
int Int(const json& o, const char* k, int def) {
  auto it = o.find(k);
  return it != o.end() && it->is_number_integer() ? it->get<int>() : def;
}

struct NodeSlot {
  std::string name;
  int free_gpus;
  int index;
  int pods = 0;
  bool tainted = false;  // NoSchedule/NoExecute: skipped by automatic placement
};

// A workload's controller as emitted: what its pods are owned by.
struct WorkloadOwner {
  std::string name;
  json ref;  // the pods' ownerReference
};

// Emits a scenario's objects in order: population, then per workload its Namespace,
// PriorityClass and controller, then PDBs, nodes, pods, ResourceSlices and the raw objects.
class ScenarioEmitter {
 public:
  ScenarioEmitter(const Scenario& sc, const ObjectSink& sink) : sc_(sc), sink_(sink) {
    base_.kube_version = sc.kube_version;
    base_.dra = sc.dra;
    base_.seed = sc.seed;
  }
  Status Run();

 private:
  Status Emit(json o);
  Status EmitPopulation(const json& p);
  Status ExpandNodes(const json& n);
  Status EmitWorkload(const json& w);
  StatusOr<WorkloadOwner> EmitController(const json& w, const std::string& kind, const json& labels,
                                         const json& tmpl);
  std::vector<NodeSlot*> Candidates(const json& w, const std::string& kind);
  json MakePod(const WorkloadOwner& owner, int r, const std::string& ns, const json& labels,
               const json& tmpl, const std::string& kind);
  void PlacePods(const json& w, const std::string& kind, const WorkloadOwner& owner,
                 const json& labels, const json& tmpl);
  Status AddPdb(const json& w, const std::string& ns);

  const Scenario& sc_;
  const ObjectSink& sink_;
  std::set<std::string> seen_;  // Namespace/PriorityClass de-duplication
  PopulationSpec base_;
  int next_index_ = 0;
  std::vector<NodeSlot> slots_;
  std::vector<json> node_objs_;
  std::vector<std::pair<std::string, std::pair<int, std::string>>>
      slices_;                                                         // node -> (gpus, product)
  std::map<std::string, std::vector<DriverTaintSpec>> driver_taints_;  // node -> its slice's
  std::vector<json> pods_;
  std::vector<json> pdbs_;
};

Status ScenarioEmitter::Emit(json o) {
  std::string kind = Str(o, "kind");
  if (kind == "Namespace" || kind == "PriorityClass") {
    if (!seen_.insert(kind + "/" + Str(o["metadata"], "name")).second) return OkStatus();
  }
  return sink_(std::move(o));
}

Status ScenarioEmitter::EmitPopulation(const json& p) {
  PopulationSpec ps = base_;
  ps.nodes = Int(p, "nodes", 0);
  ps.gpus_per_node = Int(p, "gpusPerNode", 8);
  ps.pods_per_node = Int(p, "podsPerNode", 0);
  ps.gpu_product = Str(p, "gpuProduct", ps.gpu_product);
  ps.node_prefix = Str(p, "nodePrefix", ps.node_prefix);
  ps.nodes_per_workload = Int(p, "nodesPerWorkload", ps.nodes_per_workload);
  ps.pdbs = p.value("pdbs", json(true)) == true;
  ps.daemonset_pods = p.value("daemonSetPods", json(true)) == true;
  GG_RETURN_IF_ERROR(GeneratePopulation(ps, [this](json o) { return Emit(std::move(o)); }));
  next_index_ = ps.nodes;
  return OkStatus();
}

// One nodes entry, expanded by its count: the Node objects and a placement slot for each.
Status ScenarioEmitter::ExpandNodes(const json& n) {
  // Validate() saw a mapping; its JSON form can still differ (a tagged or aliased node).
  if (!n.is_object()) return InvalidArgumentError("scenario: a node entry is not a mapping");
  int count = n.contains("count") ? Int(n, "count", 1) : 0;
  int gpus = Int(n, "gpus", 8);
  std::string product = Str(n, "product", base_.gpu_product);
  std::map<std::string, std::string> labels;
  const json node_labels = n.value("labels", json::object());
  if (!node_labels.is_object())
    return InvalidArgumentError("scenario: node " + Str(n, "name") + ": labels is not a mapping");
  for (auto it = node_labels.begin(); it != node_labels.end(); ++it)
    labels[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
  json taints = n.value("taints", json());
  for (int i = 0; i < std::max(1, count); ++i) {
    std::string name = count ? Str(n, "name") + "-" + std::to_string(i) : Str(n, "name");
    json node = MakeGpuNode(base_, next_index_, name, gpus, product, labels, taints);
    if (n.value("unschedulable", json(false)) == true) node["spec"]["unschedulable"] = true;
    bool schedulable = n.value("unschedulable", json(false)) != true;
    bool tainted = false;
    if (taints.is_array())
      for (const auto& t : taints)
        tainted |= t.is_object() && t.value("effect", "") != "PreferNoSchedule";
    slots_.push_back({name, schedulable ? gpus : -1, next_index_++, 0, tainted});
    node_objs_.push_back(std::move(node));
    slices_.push_back({name, {gpus, product}});
    for (const auto& t : n.value("driverTaints", json::array())) {
      if (!t.is_object()) continue;  // validated as a list of mappings
      DriverTaintSpec d;
      d.device = Str(t, "device");
      d.key = Str(t, "key", d.key);
      if (auto v = t.find("value"); v != t.end())  // an unquoted Xid is a YAML number
        d.value = v->is_string() ? v->get<std::string>() : v->dump();
      d.effect = Str(t, "effect", d.effect);
      driver_taints_[name].push_back(std::move(d));
    }
  }
  return OkStatus();
}

// The pod template of a workload: one container asking for its GPUs.
json WorkloadTemplate(const json& w, const std::string& kind, const json& labels) {
  int gpus = Int(w, "gpus", 0);
  std::string pc = Str(w, "priorityClassName");
  json container = {{"name", "main"},
                    {"image", "nvcr.io/nvidia/pytorch:25.01-py3"},
                    {"resources", {{"requests", {{"cpu", "1"}}}}}};
  if (gpus > 0) {
    container["resources"]["requests"]["nvidia.com/gpu"] = std::to_string(gpus);
    container["resources"]["limits"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
  }
  json pod_spec = {{"containers", {container}},
                   {"terminationGracePeriodSeconds", 30},
                   {"restartPolicy", kind == "Job" ? "OnFailure" : "Always"}};
  if (!pc.empty()) pod_spec["priorityClassName"] = pc;
  if (kind == "DaemonSet") pod_spec["tolerations"] = {{{"operator", "Exists"}}};
  return {{"metadata", {{"labels", labels}}}, {"spec", pod_spec}};
}

// The controller (and a Deployment's ReplicaSet); returns what the pods are owned by.
StatusOr<WorkloadOwner> ScenarioEmitter::EmitController(const json& w, const std::string& kind,
                                                        const json& labels, const json& tmpl) {
  std::string name = Str(w, "name");
  std::string ns = Str(w, "namespace", "ml");
  int replicas = Int(w, "replicas", 1);
  std::string uid = DeterministicUid(kind + "/" + ns + "/" + name, sc_.seed);
  json ctrl = {
      {"apiVersion", kind == "Job" ? "batch/v1" : "apps/v1"},
      {"kind", kind},
      {"metadata",
       {{"name", name}, {"namespace", ns}, {"uid", uid}, {"generation", 1}, {"labels", labels}}},
      {"spec", {{"selector", {{"matchLabels", {{"app", name}}}}}, {"template", tmpl}}}};
  if (kind == "Deployment" || kind == "ReplicaSet") ctrl["spec"]["replicas"] = replicas;
  if (kind == "Job") ctrl["spec"]["parallelism"] = replicas, ctrl["spec"]["completions"] = replicas;
  GG_RETURN_IF_ERROR(Emit(ctrl));
  std::string owner_kind = kind, owner_name = name, owner_uid = uid,
              owner_api = Str(ctrl, "apiVersion");
  if (kind == "Deployment") {
    owner_kind = "ReplicaSet";
    owner_name = name + "-" + DeterministicUid(name, sc_.seed).substr(0, 10);
    owner_uid = DeterministicUid("ReplicaSet/" + ns + "/" + owner_name, sc_.seed);
    json rs = ctrl;
    rs["kind"] = "ReplicaSet";
    rs["metadata"]["name"] = owner_name;
    rs["metadata"]["uid"] = owner_uid;
    rs["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                          {"kind", "Deployment"},
                                          {"name", name},
                                          {"uid", uid},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}};
    GG_RETURN_IF_ERROR(Emit(rs));
  }
  json owner = {{"apiVersion", owner_api}, {"kind", owner_kind}, {"name", owner_name},
                {"uid", owner_uid},        {"controller", true}, {"blockOwnerDeletion", true}};
  return WorkloadOwner{owner_name, owner};
}

// The nodes a workload's pods may be placed on: those it names, else every untainted one
// (every one for a DaemonSet).
std::vector<NodeSlot*> ScenarioEmitter::Candidates(const json& w, const std::string& kind) {
  std::vector<NodeSlot*> candidates;
  if (w.contains("nodes")) {
    for (const auto& nn : w["nodes"])
      for (auto& s : slots_)
        if (s.name == nn.get<std::string>()) candidates.push_back(&s);
  } else {
    for (auto& s : slots_)
      if (!s.tainted || kind == "DaemonSet") candidates.push_back(&s);
  }
  return candidates;
}

// Replica r of a workload, not yet placed.
json ScenarioEmitter::MakePod(const WorkloadOwner& owner, int r, const std::string& ns,
                              const json& labels, const json& tmpl, const std::string& kind) {
  // The UUID's tail: FNV's high bits barely change with the last byte of the key, so the
  // head of the UUID repeats for replicas 0..9.
  std::string puid = DeterministicUid(owner.name + "#" + std::to_string(r), sc_.seed);
  std::string pname = owner.name + "-" + puid.substr(puid.size() - 5);
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  pod["metadata"] = {{"name", pname},
                     {"namespace", ns},
                     {"uid", DeterministicUid("Pod/" + ns + "/" + pname, sc_.seed)},
                     {"labels", labels},
                     {"ownerReferences", {owner.ref}}};
  pod["spec"] = tmpl["spec"];
  if (kind == "DaemonSet") {  // the hash of the template as stored: with its pod defaults
    json stored = tmpl;
    SetPodSpecDefaults(stored["spec"], false);
    pod["metadata"]["labels"]["controller-revision-hash"] = PodTemplateHash(stored);
    pod["metadata"]["labels"]["pod-template-generation"] = "1";
  }
  AddDefaultTolerationSeconds(pod);  // what the API server's admission gives every pod
  return pod;
}

// The workload's pods, placed round-robin where their GPUs fit (a DaemonSet: one per
// candidate node); a pod that fits nowhere stays Pending.
void ScenarioEmitter::PlacePods(const json& w, const std::string& kind, const WorkloadOwner& owner,
                                const json& labels, const json& tmpl) {
  std::string ns = Str(w, "namespace", "ml");
  int gpus = Int(w, "gpus", 0);
  std::vector<NodeSlot*> candidates = Candidates(w, kind);
  int count = kind == "DaemonSet" ? static_cast<int>(candidates.size()) : Int(w, "replicas", 1);
  size_t rr = 0;
  for (int r = 0; r < count; ++r) {
    NodeSlot* target = nullptr;
    if (kind == "DaemonSet") {
      target = candidates[r];
    } else {
      for (size_t k = 0; k < candidates.size() && !target; ++k) {
        NodeSlot* c = candidates[(rr + k) % candidates.size()];
        if (c->free_gpus >= gpus && c->free_gpus >= 0 && c->pods < 110) target = c, rr = rr + k + 1;
      }
    }
    json pod = MakePod(owner, r, ns, labels, tmpl, kind);
    if (target) {
      if (kind != "DaemonSet") target->free_gpus -= gpus;
      target->pods++;
      pod["spec"]["nodeName"] = target->name;
      json conds = json::array();
      for (const char* t : {"Initialized", "Ready", "ContainersReady", "PodScheduled"})
        conds.push_back({{"type", t}, {"status", "True"}});
      pod["status"] = {{"phase", "Running"}, {"conditions", conds}};
    } else {
      pod["status"] = {
          {"phase", "Pending"},
          {"conditions",
           {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}}}}};
    }
    pods_.push_back(std::move(pod));
  }
}

// The workload's PodDisruptionBudget, with the status its pods give it.
Status ScenarioEmitter::AddPdb(const json& w, const std::string& ns) {
  std::string name = Str(w, "name");
  int replicas = Int(w, "replicas", 1);
  json pdb = {{"apiVersion", "policy/v1"}, {"kind", "PodDisruptionBudget"}};
  pdb["metadata"] = {{"name", name + "-pdb"},
                     {"namespace", ns},
                     {"generation", 1},
                     {"uid", DeterministicUid("PodDisruptionBudget/" + ns + "/" + name, sc_.seed)}};
  pdb["spec"] = w["pdb"];
  pdb["spec"]["selector"] = {{"matchLabels", {{"app", name}}}};
  auto st = ComputePdbStatus(
      pdb, pods_,
      [replicas](const json&, std::string_view) -> std::optional<int> { return replicas; });
  if (!st.ok())
    return InvalidArgumentError("scenario: workload " + name + ": pdb: " + st.status().message());
  pdbs_.push_back(ApplyPdbStatus(pdb, *st, "2026-01-01T00:00:00Z"));
  return OkStatus();
}

// Controllers now, PDBs later; pods are placed now and emitted after the nodes.
Status ScenarioEmitter::EmitWorkload(const json& w) {
  if (!w.is_object()) return InvalidArgumentError("scenario: a workload entry is not a mapping");
  std::string name = Str(w, "name");
  std::string kind = Str(w, "kind", "Deployment");
  std::string ns = Str(w, "namespace", "ml");
  GG_RETURN_IF_ERROR(
      Emit({{"apiVersion", "v1"},
            {"kind", "Namespace"},
            {"metadata", {{"name", ns}, {"uid", DeterministicUid("Namespace/" + ns, sc_.seed)}}}}));
  std::string pc = Str(w, "priorityClassName");
  if (!pc.empty())
    GG_RETURN_IF_ERROR(Emit(
        {{"apiVersion", "scheduling.k8s.io/v1"},
         {"kind", "PriorityClass"},
         {"metadata", {{"name", pc}, {"uid", DeterministicUid("PriorityClass/" + pc, sc_.seed)}}},
         {"value", Int(w, "priority", 1000)}}));
  json labels = {{"app", name}};
  const json extra_labels = w.value("labels", json::object());
  if (!extra_labels.is_object())
    return InvalidArgumentError("scenario: workload " + name + ": labels is not a mapping");
  for (auto it = extra_labels.begin(); it != extra_labels.end(); ++it) labels[it.key()] = *it;
  json tmpl = WorkloadTemplate(w, kind, labels);
  GG_ASSIGN_OR_RETURN(WorkloadOwner owner, EmitController(w, kind, labels, tmpl));
  PlacePods(w, kind, owner, labels, tmpl);
  if (w.contains("pdb")) GG_RETURN_IF_ERROR(AddPdb(w, ns));
  return OkStatus();
}

Status ScenarioEmitter::Run() {
  const json& doc = sc_.doc;
  if (doc.contains("population")) GG_RETURN_IF_ERROR(EmitPopulation(doc["population"]));
  for (const auto& n : doc.value("nodes", json::array())) GG_RETURN_IF_ERROR(ExpandNodes(n));
  for (const auto& w : doc.value("workloads", json::array())) GG_RETURN_IF_ERROR(EmitWorkload(w));
  for (auto& p : pdbs_) GG_RETURN_IF_ERROR(Emit(std::move(p)));
  for (auto& n : node_objs_) GG_RETURN_IF_ERROR(Emit(std::move(n)));
  for (auto& p : pods_) GG_RETURN_IF_ERROR(Emit(std::move(p)));
  if (sc_.dra)
    for (const auto& [node, gp] : slices_) {
      if (gp.first <= 0) continue;
      json slice = MakeResourceSlice(node, gp.first, gp.second, sc_.kube_version, sc_.seed);
      for (const auto& t : driver_taints_[node]) {
        Status added = AddDriverTaint(slice, t, sc_.kube_version);
        if (!added.ok())
          return InvalidArgumentError("scenario: node " + node + ": " + added.message());
      }
      GG_RETURN_IF_ERROR(Emit(std::move(slice)));
    }
  for (const auto& o : doc.value("objects", json::array())) GG_RETURN_IF_ERROR(Emit(o));
  return OkStatus();
}

}  // namespace

Status EmitScenario(const Scenario& sc, const ObjectSink& sink) {
  if (!sink) return InvalidArgumentError("scenario: no sink");
  return ScenarioEmitter(sc, sink).Run();
}

}  // namespace gg::sim
