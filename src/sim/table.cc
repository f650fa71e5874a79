// Table rendering (server-side printing) for the simulator.
#include "sim/table.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "common/time_util.h"
#include "sim/json_path.h"
#include "sim/registry.h"

namespace gg::sim {

using nlohmann::json;

namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json& v = JsonAt(j, path);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::int64_t Int(const json& j, std::initializer_list<const char*> path) {
  const json& v = JsonAt(j, path);
  return v.is_number() ? v.get<std::int64_t>() : 0;
}

std::string OrNone(std::string s) { return s.empty() ? "<none>" : s; }

// translateTimestampSince: "<unknown>" for a missing time.
std::string Since(const std::string& ts, WallTime now) {
  if (ts.empty()) return "<unknown>";
  auto t = ParseRfc3339(ts);
  if (!t.ok()) return "<unknown>";
  return HumanDuration(std::chrono::duration_cast<Duration>(now - *t));
}

json Col(const char* name, const char* type, int priority, const char* description,
         const char* format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

const char* kNameDoc =
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const char* kAgeDoc =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

json NameCol() { return Col("Name", "string", 0, kNameDoc, "name"); }
json AgeCol() { return Col("Age", "string", 0, kAgeDoc); }

// The templates' container names and images, joined by ",".
std::pair<std::string, std::string> ContainersAndImages(const json& pod_spec) {
  std::string names, images;
  for (const auto& c :
       JsonAt(pod_spec, {"containers"}).is_array() ? pod_spec["containers"] : json::array()) {
    if (!names.empty()) names += ",";
    if (!images.empty()) images += ",";
    names += Str(c, {"name"});
    images += Str(c, {"image"});
  }
  return {names, images};
}

// metav1.FormatLabelSelector.
std::string FormatSelector(const json& sel) {
  if (!sel.is_object()) return "<none>";
  std::vector<std::string> parts;
  if (sel.contains("matchLabels") && sel["matchLabels"].is_object())
    for (const auto& [k, v] : sel["matchLabels"].items())
      parts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  if (sel.contains("matchExpressions") && sel["matchExpressions"].is_array()) {
    for (const auto& e : sel["matchExpressions"]) {
      std::string key = Str(e, {"key"}), op = Str(e, {"operator"});
      std::vector<std::string> vals;
      for (const auto& v : JsonAt(e, {"values"}).is_array() ? e["values"] : json::array())
        if (v.is_string()) vals.push_back(v.get<std::string>());
      std::string joined;
      for (const auto& v : vals) joined += (joined.empty() ? "" : ",") + v;
      if (op == "In")
        parts.push_back(key + " in (" + joined + ")");
      else if (op == "NotIn")
        parts.push_back(key + " notin (" + joined + ")");
      else if (op == "Exists")
        parts.push_back(key);
      else if (op == "DoesNotExist")
        parts.push_back("!" + key);
    }
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  // An empty selector selects everything; the real printer shows "<none>" for it.
  return out.empty() ? "<none>" : out;
}

std::string FormatLabels(const json& m) {
  if (!m.is_object() || m.empty()) return "<none>";
  std::string out;
  for (const auto& [k, v] : m.items())
    out += (out.empty() ? "" : ",") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

std::string IntOrString(const json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_string()) return v.get<std::string>();
  return "N/A";
}

// ---- per-kind printers (cells after Name) ------------------------------------------------

json NodeCells(const json& o, WallTime now) {
  std::vector<std::string> status;
  for (const auto& c :
       JsonAt(o, {"status", "conditions"}).is_array() ? o["status"]["conditions"] : json::array()) {
    if (Str(c, {"type"}) != "Ready") continue;
    status = {Str(c, {"status"}) == "True" ? "Ready" : "NotReady"};
  }
  if (status.empty()) status.push_back("Unknown");
  if (JsonAt(o, {"spec", "unschedulable"}) == true) status.push_back("SchedulingDisabled");
  std::string st;
  for (const auto& s : status) st += (st.empty() ? "" : ",") + s;
  std::set<std::string> roles;
  const json& labels = JsonAt(o, {"metadata", "labels"});
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      const std::string prefix = "node-role.kubernetes.io/";
      if (k.rfind(prefix, 0) == 0 && k.size() > prefix.size())
        roles.insert(k.substr(prefix.size()));
      if (k == "kubernetes.io/role" && v.is_string() && !v.get<std::string>().empty())
        roles.insert(v.get<std::string>());
    }
  }
  std::string role_s;
  for (const auto& r : roles) role_s += (role_s.empty() ? "" : ",") + r;
  auto addr = [&](const char* type) {
    for (const auto& a :
         JsonAt(o, {"status", "addresses"}).is_array() ? o["status"]["addresses"] : json::array())
      if (Str(a, {"type"}) == type) return Str(a, {"address"});
    return std::string("<none>");
  };
  auto unknown = [](std::string s) { return s.empty() ? std::string("<unknown>") : s; };
  return {st,
          OrNone(role_s),
          Since(Str(o, {"metadata", "creationTimestamp"}), now),
          Str(o, {"status", "nodeInfo", "kubeletVersion"}),
          addr("InternalIP"),
          addr("ExternalIP"),
          unknown(Str(o, {"status", "nodeInfo", "osImage"})),
          unknown(Str(o, {"status", "nodeInfo", "kernelVersion"})),
          unknown(Str(o, {"status", "nodeInfo", "containerRuntimeVersion"}))};
}

json PodCells(const json& o, WallTime now) {
  const json& cs = JsonAt(o, {"status", "containerStatuses"});
  std::int64_t total = JsonAt(o, {"spec", "containers"}).is_array()
                           ? static_cast<std::int64_t>(o["spec"]["containers"].size())
                           : 0;
  std::int64_t ready = 0, restarts = 0;
  std::string reason = Str(o, {"status", "phase"});
  if (!Str(o, {"status", "reason"}).empty()) reason = Str(o, {"status", "reason"});
  bool running = false;
  if (cs.is_array()) {
    for (auto it = cs.rbegin(); it != cs.rend(); ++it) {
      const json& c = *it;
      restarts += Int(c, {"restartCount"});
      std::string waiting = Str(c, {"state", "waiting", "reason"});
      std::string term = Str(c, {"state", "terminated", "reason"});
      if (!waiting.empty()) {
        reason = waiting;
      } else if (!term.empty()) {
        reason = term;
      } else if (JsonAt(c, {"state", "terminated"}).is_object()) {
        std::int64_t sig = Int(c, {"state", "terminated", "signal"});
        reason = sig ? "Signal:" + std::to_string(sig)
                     : "ExitCode:" + std::to_string(Int(c, {"state", "terminated", "exitCode"}));
      } else if (c.value("ready", false) && JsonAt(c, {"state", "running"}).is_object()) {
        running = true;
        ++ready;
      }
    }
  }
  if (reason == "Completed" && running) reason = "Running";
  if (JsonAt(o, {"metadata", "deletionTimestamp"}).is_string())
    reason = Str(o, {"status", "reason"}) == "NodeLost" ? "Unknown" : "Terminating";
  std::string gates = "<none>";
  const json& rg = JsonAt(o, {"spec", "readinessGates"});
  if (rg.is_array() && !rg.empty()) {
    std::int64_t ok = 0;
    for (const auto& g : rg)
      for (const auto& c : JsonAt(o, {"status", "conditions"}).is_array()
                               ? o["status"]["conditions"]
                               : json::array())
        if (Str(c, {"type"}) == Str(g, {"conditionType"}) && Str(c, {"status"}) == "True") ++ok;
    gates = std::to_string(ok) + "/" + std::to_string(rg.size());
  }
  return {std::to_string(ready) + "/" + std::to_string(total),
          reason,
          std::to_string(restarts),
          Since(Str(o, {"metadata", "creationTimestamp"}), now),
          OrNone(Str(o, {"status", "podIP"})),
          OrNone(Str(o, {"spec", "nodeName"})),
          OrNone(Str(o, {"status", "nominatedNodeName"})),
          gates};
}

// Events are stored in core/v1 form.
json EventCells(const json& o, WallTime now) {
  auto micro_since = [&](const char* f) { return Since(Str(o, {f}), now); };
  std::string first =
      Str(o, {"firstTimestamp"}).empty() ? micro_since("eventTime") : micro_since("firstTimestamp");
  std::string last = Str(o, {"lastTimestamp"}).empty() ? first : micro_since("lastTimestamp");
  std::int64_t count = Int(o, {"count"});
  if (JsonAt(o, {"series"}).is_object()) {
    last = Since(Str(o, {"series", "lastObservedTime"}), now);
    count = Int(o, {"series", "count"});
  } else if (count == 0) {
    count = 1;
  }
  std::string kind = Lower(Str(o, {"involvedObject", "kind"}));
  std::string name = Str(o, {"involvedObject", "name"});
  std::string target = name.empty() ? kind : kind + "/" + name;
  std::string component = Str(o, {"source", "component"});
  std::string host = Str(o, {"source", "host"});
  if (component.empty()) {
    component = Str(o, {"reportingComponent"});
    host = Str(o, {"reportingInstance"});
  }
  std::string source = component;
  if (!host.empty()) source += ", " + host;
  return {last,
          Str(o, {"type"}),
          Str(o, {"reason"}),
          target,
          Str(o, {"involvedObject", "fieldPath"}),
          source,
          Trim(Str(o, {"message"})),
          first,
          count,
          Str(o, {"metadata", "name"})};
}

json CrdCells(const ResourceInfo& ri, const json& o, WallTime now) {
  json cells = json::array();
  const json& cols = ri.printer_columns;
  auto one = [&](const json& col) -> json {
    std::string type = col.value("type", "string");
    auto found = JsonPathFind(o, col.value("jsonPath", ""));
    if (!found.ok() || found->empty() || (*found)[0]->is_null()) return nullptr;
    const json& v = *(*found)[0];
    if (type == "string") return v.is_string() ? v.get<std::string>() : v.dump();
    if (type == "integer" && v.is_number()) return v.get<std::int64_t>();
    if (type == "number" && v.is_number()) return v.get<double>();
    if (type == "boolean" && v.is_boolean()) return v.get<bool>();
    if (type == "date" && v.is_string()) {
      auto t = ParseRfc3339(v.get<std::string>());
      if (!t.ok()) return "<invalid>";
      return HumanDuration(std::chrono::duration_cast<Duration>(now - *t));
    }
    return nullptr;
  };
  if (cols.is_array() && !cols.empty()) {
    for (const auto& c : cols) cells.push_back(one(c));
  } else {
    cells.push_back(Since(Str(o, {"metadata", "creationTimestamp"}), now));
  }
  return cells;
}

}  // namespace

std::string HumanDuration(Duration d) {
  using namespace std::chrono;
  long long secs = duration_cast<seconds>(d).count();
  if (secs < -1) return "<invalid>";
  if (secs < 0) return "0s";
  if (secs < 120) return std::to_string(secs) + "s";
  long long minutes = secs / 60;
  if (minutes < 10) {
    long long s = secs % 60;
    return s == 0 ? std::to_string(minutes) + "m"
                  : std::to_string(minutes) + "m" + std::to_string(s) + "s";
  }
  if (minutes < 60 * 3) return std::to_string(minutes) + "m";
  long long hours = minutes / 60;
  if (hours < 8) {
    long long m = minutes % 60;
    return m == 0 ? std::to_string(hours) + "h"
                  : std::to_string(hours) + "h" + std::to_string(m) + "m";
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    long long h = hours % 24;
    return h == 0 ? std::to_string(hours / 24) + "d"
                  : std::to_string(hours / 24) + "d" + std::to_string(h) + "h";
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    long long dy = (hours / 24) % 365;
    return dy == 0 ? std::to_string(hours / 24 / 365) + "y"
                   : std::to_string(hours / 24 / 365) + "y" + std::to_string(dy) + "d";
  }
  return std::to_string(hours / 24 / 365) + "y";
}

std::optional<std::string> ConversionFromAccept(std::string_view accept, std::string_view as_kind,
                                                std::string_view group,
                                                std::initializer_list<std::string_view> versions) {
  while (!accept.empty()) {
    auto comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    std::string type;
    std::string as, g, v;
    bool first = true;
    while (true) {
      auto semi = range.find(';');
      std::string part = Trim(range.substr(0, semi));
      if (first) {
        type = Lower(part);
        first = false;
      } else if (auto eq = part.find('='); eq != std::string::npos) {
        std::string k = Lower(Trim(part.substr(0, eq)));
        std::string val = Trim(part.substr(eq + 1));
        if (k == "as") as = val;
        if (k == "g") g = val;
        if (k == "v") v = val;
      }
      if (semi == std::string_view::npos) break;
      range.remove_prefix(semi + 1);
    }
    if (type != "application/json" && type != "*/*" && type != "application/*") continue;
    if (as.empty()) return std::nullopt;  // a plain JSON object is acceptable first
    if (as == as_kind && g == group)
      for (auto want : versions)
        if (v == want) return v;
    // Conversions we do not serve (other versions, PartialObjectMetadata): try the next one.
  }
  return std::nullopt;
}

std::optional<std::string> TableVersionFromAccept(std::string_view accept) {
  auto v = ConversionFromAccept(accept, "Table", "meta.k8s.io", {"v1", "v1beta1"});
  if (!v) return std::nullopt;
  return "meta.k8s.io/" + *v;
}

StatusOr<IncludeObject> ParseIncludeObject(std::string_view v) {
  if (v.empty() || v == "Metadata") return IncludeObject::kMetadata;
  if (v == "None") return IncludeObject::kNone;
  if (v == "Object") return IncludeObject::kObject;
  return InvalidArgumentError("includeObject: Unsupported value: \"" + std::string(v) +
                              "\": supported values: \"Metadata\", \"None\", \"Object\"");
}

// kubectl's columns after Name, per kind, as the real server's table convertors print them.
namespace {

using Columns = std::vector<json>;

// A custom resource's additionalPrinterColumns (Age without any).
Columns CustomResourceColumns(const ResourceInfo& ri) {
  if (!ri.printer_columns.is_array() || ri.printer_columns.empty())
    return {Col("Age", "date", 0, kAgeDoc)};
  Columns cols;
  for (const auto& c : ri.printer_columns) {
    std::string desc = c.value("description", "");
    if (desc.empty())
      desc = "Custom resource definition column (in JSONPath format): " + c.value("jsonPath", "");
    cols.push_back({{"name", c.value("name", "")},
                    {"type", c.value("type", "string")},
                    {"format", c.value("format", "")},
                    {"description", desc},
                    {"priority", c.value("priority", 0)}});
  }
  return cols;
}

Columns CoreColumns(const std::string& r) {
  if (r == "nodes")
    return {
        Col("Status", "string", 0, "The status of the node"),
        Col("Roles", "string", 0, "The roles of the node"),
        AgeCol(),
        Col("Version", "string", 0, "Kubelet Version reported by the node."),
        Col("Internal-IP", "string", 1,
            "List of addresses reachable to the node. Queried from cloud provider, if available."),
        Col("External-IP", "string", 1,
            "List of addresses reachable to the node. Queried from cloud provider, if available."),
        Col("OS-Image", "string", 1,
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
            "(wheezy))."),
        Col("Kernel-Version", "string", 1,
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
        Col("Container-Runtime", "string", 1,
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
            "containerd://1.4.2).")};
  if (r == "pods")
    return {Col("Ready", "string", 0,
                "The aggregate readiness state of this pod for accepting traffic."),
            Col("Status", "string", 0, "The aggregate status of the containers in this pod."),
            Col("Restarts", "string", 0,
                "The number of times the containers in this pod have been restarted and when the "
                "last container in this pod has restarted."),
            AgeCol(),
            Col("IP", "string", 1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if "
                "not yet allocated."),
            Col("Node", "string", 1,
                "NodeName is a request to schedule this pod onto a specific node."),
            Col("Nominated Node", "string", 1,
                "nominatedNodeName is set only when this pod preempts other pods on the node."),
            Col("Readiness Gates", "string", 1,
                "If specified, all readiness gates will be evaluated for pod readiness.")};
  if (r == "namespaces")
    return {Col("Status", "string", 0, "The status of the namespace"), AgeCol()};
  if (r == "configmaps")
    return {Col("Data", "string", 0, "Data contains the configuration data."), AgeCol()};
  return {};
}

// Events have no Name column first: theirs is last, at priority 1.
Columns EventColumns() {
  return {
      Col("Last Seen", "string", 0, "The last time this event was observed."),
      Col("Type", "string", 0,
          "Type of this event (Normal, Warning), new types could be added in the future."),
      Col("Reason", "string", 0,
          "This should be a short, machine understandable string that gives the reason for the "
          "transition into the object's current status."),
      Col("Object", "string", 0, "The object this Event is about."),
      Col("Subobject", "string", 1, "The subobject (fieldPath) this Event is about."),
      Col("Source", "string", 1, "The component reporting this event."),
      Col("Message", "string", 0, "A human-readable description of the status of this operation."),
      Col("First Seen", "string", 1, "The time at which the event was first recorded."),
      Col("Count", "integer", 1, "The number of times this event has occurred."),
      Col("Name", "string", 1, kNameDoc, "name")};
}

Columns AppsColumns(const std::string& r) {
  if (r == "deployments")
    return {Col("Ready", "string", 0, "Number of the pod with ready state"),
            Col("Up-to-date", "string", 0,
                "Total number of non-terminated pods targeted by this deployment that have the "
                "desired template spec."),
            Col("Available", "string", 0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by "
                "this deployment."),
            AgeCol(),
            Col("Containers", "string", 1, "Names of each container in the template."),
            Col("Images", "string", 1, "Images referenced by each container in the template."),
            Col("Selector", "string", 1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this "
                "will be the ones affected by this deployment.")};
  if (r == "daemonsets")
    return {
        Col("Desired", "integer", 0,
            "The total number of nodes that should be running the daemon pod (including nodes "
            "correctly running the daemon pod)."),
        Col("Current", "integer", 0,
            "The number of nodes that are running at least 1 daemon pod and are supposed to run "
            "the daemon pod."),
        Col("Ready", "integer", 0,
            "numberReady is the number of nodes that should be running the daemon pod and have one "
            "or more of the daemon pod running with a Ready Condition."),
        Col("Up-to-date", "integer", 0,
            "The total number of nodes that are running updated daemon pod"),
        Col("Available", "integer", 0,
            "The number of nodes that should be running the daemon pod and have one or more of the "
            "daemon pod running and available (ready for at least spec.minReadySeconds)"),
        Col("Node Selector", "string", 0,
            "NodeSelector is a selector which must be true for the pod to fit on a node. Selector "
            "which must match a node's labels for the pod to be scheduled on that node."),
        AgeCol(),
        Col("Containers", "string", 1, "Names of each container in the template."),
        Col("Images", "string", 1, "Images referenced by each container in the template."),
        Col("Selector", "string", 1,
            "A label query over pods that are managed by the daemon set.")};
  if (r == "replicasets")
    return {
        Col("Desired", "integer", 0, "Replicas is the number of desired pods."),
        Col("Current", "integer", 0, "Replicas is the most recently observed number of replicas."),
        Col("Ready", "integer", 0, "The number of ready replicas for this replica set."),
        AgeCol(),
        Col("Containers", "string", 1, "Names of each container in the template."),
        Col("Images", "string", 1, "Images referenced by each container in the template."),
        Col("Selector", "string", 1,
            "Selector is a label query over pods that should match the replica count.")};
  return {};
}

Columns OtherBuiltinColumns(const ResourceInfo& ri) {
  const std::string& r = ri.resource;
  if (ri.group == "coordination.k8s.io" && r == "leases")
    return {Col("Holder", "string", 0,
                "holderIdentity contains the identity of the holder of a current lease."),
            AgeCol()};
  if (ri.group == "policy" && r == "poddisruptionbudgets")
    return {Col("Min Available", "string", 0,
                "The minimum number of pods that must be available simultaneously.  This can be "
                "either an integer or a string specifying a percentage, e.g. \"28%\"."),
            Col("Max Unavailable", "string", 0,
                "The maximum number of pods that may be unavailable simultaneously.  This can be "
                "either an integer or a string specifying a percentage, e.g. \"28%\"."),
            Col("Allowed Disruptions", "integer", 0,
                "Calculated number of pods that may be disrupted at this time."),
            AgeCol()};
  if (ri.group == "resource.k8s.io" && r == "resourceslices")
    return {
        Col("Node", "string", 0, "nodeName is the name of the node which provides the resources."),
        Col("Driver", "string", 0,
            "driver is the name of the DRA driver which provides the resources."),
        Col("Pool", "string", 0, "pool is the name of the pool of resources."), AgeCol()};
  return {};
}

}  // namespace

json TableColumns(const ResourceInfo& ri) {
  Columns more;
  if (ri.custom)
    more = CustomResourceColumns(ri);
  else if (ri.storage == "events")
    return json(EventColumns());
  else if (ri.group.empty())
    more = CoreColumns(ri.resource);
  else if (ri.group == "apps")
    more = AppsColumns(ri.resource);
  else
    more = OtherBuiltinColumns(ri);
  // The server's default table convertor.
  if (more.empty()) more = {Col("Created At", "date", 0, kAgeDoc)};
  json cols = json::array({NameCol()});
  for (auto& c : more) cols.push_back(std::move(c));
  return cols;
}

json TableRow(const ResourceInfo& ri, const json& o, const json& view_obj, WallTime now,
              IncludeObject inc) {
  json cells = json::array();
  const std::string& r = ri.resource;
  const bool core = ri.group.empty();
  std::string name = Str(o, {"metadata", "name"});
  std::string age = Since(Str(o, {"metadata", "creationTimestamp"}), now);
  auto extend = [&](const json& more) {
    for (const auto& c : more) cells.push_back(c);
  };
  if (ri.storage != "events") cells.push_back(name);
  if (ri.custom) {
    extend(CrdCells(ri, o, now));
  } else if (core && r == "nodes") {
    extend(NodeCells(o, now));
  } else if (core && r == "pods") {
    extend(PodCells(o, now));
  } else if (ri.storage == "events") {
    extend(EventCells(o, now));
  } else if (core && r == "namespaces") {
    extend({Str(o, {"status", "phase"}), age});
  } else if (core && r == "configmaps") {
    std::int64_t n = 0;
    for (const char* f : {"data", "binaryData"})
      if (JsonAt(o, {f}).is_object()) n += static_cast<std::int64_t>(o[f].size());
    extend({n, age});
  } else if (ri.group == "coordination.k8s.io" && r == "leases") {
    extend({Str(o, {"spec", "holderIdentity"}), age});
  } else if (ri.group == "apps" &&
             (r == "deployments" || r == "daemonsets" || r == "replicasets")) {
    auto [names, images] = ContainersAndImages(JsonAt(o, {"spec", "template", "spec"}));
    std::string sel = FormatSelector(JsonAt(o, {"spec", "selector"}));
    const json& rep = JsonAt(o, {"spec", "replicas"});
    std::int64_t want = rep.is_number() ? rep.get<std::int64_t>() : 1;
    if (r == "deployments") {
      extend({std::to_string(Int(o, {"status", "readyReplicas"})) + "/" + std::to_string(want),
              Int(o, {"status", "updatedReplicas"}), Int(o, {"status", "availableReplicas"}), age,
              names, images, sel});
    } else if (r == "daemonsets") {
      extend({Int(o, {"status", "desiredNumberScheduled"}),
              Int(o, {"status", "currentNumberScheduled"}), Int(o, {"status", "numberReady"}),
              Int(o, {"status", "updatedNumberScheduled"}), Int(o, {"status", "numberAvailable"}),
              FormatLabels(JsonAt(o, {"spec", "template", "spec", "nodeSelector"})), age, names,
              images, sel});
    } else {
      extend({want, Int(o, {"status", "replicas"}), Int(o, {"status", "readyReplicas"}), age, names,
              images, sel});
    }
  } else if (ri.group == "policy" && r == "poddisruptionbudgets") {
    extend({IntOrString(JsonAt(o, {"spec", "minAvailable"})),
            IntOrString(JsonAt(o, {"spec", "maxUnavailable"})),
            Int(o, {"status", "disruptionsAllowed"}), age});
  } else if (ri.group == "resource.k8s.io" && r == "resourceslices") {
    std::string node = Str(o, {"spec", "nodeName"});
    extend({node, Str(o, {"spec", "driver"}), Str(o, {"spec", "pool", "name"}), age});
  } else {
    extend({Str(o, {"metadata", "creationTimestamp"})});
  }
  json row = {{"cells", std::move(cells)}};
  if (inc == IncludeObject::kObject) {
    row["object"] = view_obj;
  } else if (inc == IncludeObject::kMetadata) {
    row["object"] = {{"kind", "PartialObjectMetadata"},
                     {"apiVersion", "meta.k8s.io/v1"},
                     {"metadata", JsonAt(view_obj, {"metadata"})}};
  }
  return row;
}

// ---- JSONPath subset -------------------------------------------------------------------

namespace {

struct PathParser {
  std::string_view s;
  std::size_t i = 0;
  bool Eat(char c) {
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  std::string Ident() {
    std::size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' ||
                            s[i] == '-' || s[i] == '$'))
      ++i;
    return std::string(s.substr(b, i - b));
  }
  std::optional<std::string> Quoted() {
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return std::nullopt;
    char q = s[i++];
    std::string out;
    while (i < s.size() && s[i] != q) out += s[i++];
    if (!Eat(q)) return std::nullopt;
    return out;
  }
  void Spaces() {
    while (i < s.size() && s[i] == ' ') ++i;
  }
};

using Nodes = std::vector<const json*>;

// ".key" or ".*" (every member or element); false when neither follows the dot.
bool DotStep(PathParser& ps, const Nodes& cur, Nodes& next) {
  std::string key = ps.Ident();
  if (key.empty()) {
    if (!ps.Eat('*')) return false;
    for (const json* c : cur)
      if (c->is_object() || c->is_array())
        for (const auto& v : *c) next.push_back(&v);
    return true;
  }
  for (const json* c : cur)
    if (c->is_object())
      if (auto it = c->find(key); it != c->end()) next.push_back(&*it);
  return true;
}

// A filter "(@.a.b == lit)" or "!=" after "[?": the field path, the operator, the literal
// (quoted string or JSON).
struct Filter {
  std::vector<std::string> fields;
  bool neq = false;
  json lit;
};

bool ParseFilter(PathParser& ps, Filter* f) {
  if (!ps.Eat('(') || !ps.Eat('@')) return false;
  while (ps.Eat('.')) {
    std::string field = ps.Ident();
    if (field.empty()) return false;
    f->fields.push_back(field);
  }
  ps.Spaces();
  if (ps.Eat('=')) {
    if (!ps.Eat('=')) return false;
  } else if (ps.Eat('!')) {
    if (!ps.Eat('=')) return false;
    f->neq = true;
  } else {
    return false;
  }
  ps.Spaces();
  if (auto q = ps.Quoted()) {
    f->lit = *q;
  } else {
    std::size_t b = ps.i;
    while (ps.i < ps.s.size() && ps.s[ps.i] != ')') ++ps.i;
    f->lit = json::parse(Trim(ps.s.substr(b, ps.i - b)), nullptr, false);
    if (f->lit.is_discarded()) return false;
  }
  ps.Spaces();
  return ps.Eat(')') && ps.Eat(']');
}

// The elements of arrays in `cur` whose field path compares to the literal as asked
// (numbers by value).
void ApplyFilter(const Filter& f, const Nodes& cur, Nodes& next) {
  for (const json* c : cur) {
    if (!c->is_array()) continue;
    for (const auto& el : *c) {
      const json* v = &el;
      for (const auto& field : f.fields) {
        if (!v->is_object() || !v->contains(field)) {
          v = nullptr;
          break;
        }
        v = &(*v)[field];
      }
      if (!v) continue;
      bool eq = (v->is_number() && f.lit.is_number()) ? v->get<double>() == f.lit.get<double>()
                                                      : *v == f.lit;
      if (eq != f.neq) next.push_back(&el);
    }
  }
}

// "[N]" or "[-N]" (from the end) after "[".
bool IndexStep(PathParser& ps, const Nodes& cur, Nodes& next) {
  std::size_t b = ps.i;
  bool neg = ps.Eat('-');
  while (ps.i < ps.s.size() && std::isdigit(static_cast<unsigned char>(ps.s[ps.i]))) ++ps.i;
  if (ps.i == b + (neg ? 1 : 0) || !ps.Eat(']')) return false;
  long idx = std::stol(std::string(ps.s.substr(b, ps.i - 1 - b)));
  for (const json* c : cur) {
    if (!c->is_array()) continue;
    long n = static_cast<long>(c->size());
    long k = idx < 0 ? n + idx : idx;
    if (k >= 0 && k < n) next.push_back(&(*c)[static_cast<std::size_t>(k)]);
  }
  return true;
}

// After "[": ['key'], [*], [?(filter)] or [index].
bool BracketStep(PathParser& ps, const Nodes& cur, Nodes& next) {
  if (auto q = ps.Quoted()) {
    if (!ps.Eat(']')) return false;
    for (const json* c : cur)
      if (c->is_object())
        if (auto it = c->find(*q); it != c->end()) next.push_back(&*it);
    return true;
  }
  if (ps.Eat('*')) {
    if (!ps.Eat(']')) return false;
    for (const json* c : cur)
      if (c->is_array())
        for (const auto& v : *c) next.push_back(&v);
    return true;
  }
  if (ps.Eat('?')) {
    Filter f;
    if (!ParseFilter(ps, &f)) return false;
    ApplyFilter(f, cur, next);
    return true;
  }
  return IndexStep(ps, cur, next);
}

}  // namespace

StatusOr<std::vector<const json*>> JsonPathFind(const json& doc, std::string_view path) {
  std::string p = Trim(path);
  std::string_view sv = p;
  // "{.a.b}" is accepted as well as ".a.b"; a leading "$" is the root.
  if (sv.size() >= 2 && sv.front() == '{' && sv.back() == '}') sv = sv.substr(1, sv.size() - 2);
  PathParser ps{sv};
  ps.Eat('$');
  Nodes cur = {&doc};
  while (ps.i < sv.size()) {
    Nodes next;
    bool ok = false;
    if (ps.Eat('.'))
      ok = DotStep(ps, cur, next);
    else if (ps.Eat('['))
      ok = BracketStep(ps, cur, next);
    if (!ok)
      return InvalidArgumentError("unsupported JSONPath " + std::string(path) + " at offset " +
                                  std::to_string(ps.i));
    cur = std::move(next);
  }
  return cur;
}

}  // namespace gg::sim
