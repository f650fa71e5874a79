// Helpers shared by the simulated cluster's control loops.
#include "sim/controller_util.h"

#include <cmath>
#include <cstdio>

#include "common/time_util.h"
#include "sim/controllers.h"

namespace gg::sim::internal {

using nlohmann::json;

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return "";
    cur = &(*cur)[p];
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

std::optional<std::int64_t> ParseQuantityMilli(const json& q) {
  if (q.is_number_integer()) return q.get<std::int64_t>() * 1000;
  if (q.is_number()) return static_cast<std::int64_t>(std::ceil(q.get<double>() * 1000));
  if (!q.is_string()) return std::nullopt;
  const std::string& s = q.get_ref<const std::string&>();
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string num = s.substr(0, i), suffix = s.substr(i);
  if (num.empty() || num == "+" || num == "-" || num == ".") return std::nullopt;
  long double v = 0;
  try {
    std::size_t used = 0;
    v = std::stold(num, &used);
    if (used != num.size()) return std::nullopt;
  } catch (...) {
    return std::nullopt;
  }
  long double mult = 1;
  if (suffix.empty()) {
  } else if (suffix == "m") {
    mult = 1e-3L;
  } else if (suffix == "k") {
    mult = 1e3L;
  } else if (suffix == "M") {
    mult = 1e6L;
  } else if (suffix == "G") {
    mult = 1e9L;
  } else if (suffix == "T") {
    mult = 1e12L;
  } else if (suffix == "P") {
    mult = 1e15L;
  } else if (suffix == "E") {
    mult = 1e18L;
  } else if (suffix == "Ki") {
    mult = 1024.0L;
  } else if (suffix == "Mi") {
    mult = 1024.0L * 1024;
  } else if (suffix == "Gi") {
    mult = 1024.0L * 1024 * 1024;
  } else if (suffix == "Ti") {
    mult = 1024.0L * 1024 * 1024 * 1024;
  } else if (suffix == "Pi") {
    mult = 1024.0L * 1024 * 1024 * 1024 * 1024;
  } else if (suffix == "Ei") {
    mult = 1024.0L * 1024 * 1024 * 1024 * 1024 * 1024;
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    try {
      std::size_t used = 0;
      int e = std::stoi(suffix.substr(1), &used);
      if (used + 1 != suffix.size()) return std::nullopt;
      mult = std::pow(10.0L, e);
    } catch (...) {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  long double milli = std::ceil(v * mult * 1000.0L - 1e-9L);
  if (milli > 9e18L || milli < -9e18L) return std::nullopt;
  return static_cast<std::int64_t>(milli);
}

namespace {

// A container's requests, its limits standing in for missing requests.
Resources ContainerRequests(const json& c) {
  Resources r;
  if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) return r;
  const json& res = c["resources"];
  for (const char* k : {"limits", "requests"}) {  // requests overwrite limits
    if (!res.contains(k) || !res[k].is_object()) continue;
    for (const auto& [name, q] : res[k].items())
      if (auto v = ParseQuantityMilli(q)) r[name] = *v;
  }
  return r;
}

}  // namespace

Resources PodRequests(const json& pod) {
  Resources total;
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object())
    return {{"pods", 1000}};
  const json& spec = pod["spec"];
  if (spec.contains("containers") && spec["containers"].is_array())
    for (const auto& c : spec["containers"])
      for (const auto& [k, v] : ContainerRequests(c)) total[k] += v;
  if (spec.contains("initContainers") && spec["initContainers"].is_array())
    for (const auto& c : spec["initContainers"]) {
      // Restartable (sidecar) init containers run alongside: they add up.
      if (c.is_object() && c.value("restartPolicy", "") == "Always") {
        for (const auto& [k, v] : ContainerRequests(c)) total[k] += v;
        continue;
      }
      for (const auto& [k, v] : ContainerRequests(c)) total[k] = std::max(total[k], v);
    }
  if (spec.contains("overhead") && spec["overhead"].is_object())
    for (const auto& [k, q] : spec["overhead"].items())
      if (auto v = ParseQuantityMilli(q)) total[k] += *v;
  total["pods"] = 1000;
  return total;
}

bool Toleration::Tolerates(const Taint& t) const {
  if (!effect.empty() && effect != t.effect) return false;
  if (op == "Exists") return key.empty() || key == t.key;
  return key == t.key && value == t.value;  // Equal (the default)
}

std::vector<Taint> NodeTaints(const json& node) {
  std::vector<Taint> out;
  if (!node.is_object() || !node.contains("spec") || !node["spec"].is_object()) return out;
  const json& spec = node["spec"];
  if (!spec.contains("taints") || !spec["taints"].is_array()) return out;
  for (const auto& t : spec["taints"]) {
    if (!t.is_object()) continue;
    out.push_back(
        {t.value("key", ""),
         t.contains("value") && t["value"].is_string() ? t["value"].get<std::string>() : "",
         t.value("effect", ""),
         t.contains("timeAdded") && t["timeAdded"].is_string() ? t["timeAdded"].get<std::string>()
                                                               : ""});
  }
  return out;
}

std::vector<Toleration> PodTolerations(const json& pod) {
  std::vector<Toleration> out;
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) return out;
  const json& spec = pod["spec"];
  if (!spec.contains("tolerations") || !spec["tolerations"].is_array()) return out;
  for (const auto& t : spec["tolerations"]) {
    if (!t.is_object()) continue;
    Toleration tol;
    tol.key = t.value("key", "");
    tol.op = t.value("operator", "");
    if (tol.op.empty()) tol.op = "Equal";
    tol.value = t.contains("value") && t["value"].is_string() ? t["value"].get<std::string>() : "";
    tol.effect = t.value("effect", "");
    if (t.contains("tolerationSeconds") && t["tolerationSeconds"].is_number_integer())
      tol.seconds = t["tolerationSeconds"].get<std::int64_t>();
    out.push_back(std::move(tol));
  }
  return out;
}

const Taint* FirstUntolerated(const std::vector<Taint>& taints, const std::vector<Toleration>& tols,
                              std::initializer_list<std::string_view> effects) {
  for (const auto& t : taints) {
    bool relevant = false;
    for (auto e : effects) relevant |= (t.effect == e);
    if (!relevant) continue;
    bool ok = false;
    for (const auto& tol : tols)
      if (tol.Tolerates(t)) {
        ok = true;
        break;
      }
    if (!ok) return &t;
  }
  return nullptr;
}

namespace {

bool RequirementMatches(const json& req, const json& labels, const std::string& node_name,
                        bool field) {
  if (!req.is_object()) return false;
  std::string key = req.value("key", "");
  std::string op = req.value("operator", "");
  std::optional<std::string> have;
  if (field) {
    if (key == "metadata.name") have = node_name;
  } else if (labels.is_object() && labels.contains(key) && labels[key].is_string()) {
    have = labels[key].get<std::string>();
  }
  std::vector<std::string> values;
  if (req.contains("values") && req["values"].is_array())
    for (const auto& v : req["values"])
      if (v.is_string()) values.push_back(v.get<std::string>());
  auto in = [&] {
    for (const auto& v : values)
      if (have && *have == v) return true;
    return false;
  };
  if (op == "In") return have.has_value() && in();
  if (op == "NotIn") return !have.has_value() || !in();
  if (op == "Exists") return have.has_value();
  if (op == "DoesNotExist") return !have.has_value();
  if (op == "Gt" || op == "Lt") {
    if (!have || values.size() != 1) return false;
    try {
      std::size_t u1 = 0, u2 = 0;
      long long a = std::stoll(*have, &u1), b = std::stoll(values[0], &u2);
      if (u1 != have->size() || u2 != values[0].size()) return false;
      return op == "Gt" ? a > b : a < b;
    } catch (...) {
      return false;
    }
  }
  return false;  // an unknown operator matches nothing
}

}  // namespace

bool NodeSelectorTermMatches(const json& term, const json& labels, const std::string& node_name) {
  if (!term.is_object()) return false;
  bool any = false;
  for (const char* k : {"matchExpressions", "matchFields"}) {
    if (!term.contains(k) || !term[k].is_array()) continue;
    for (const auto& req : term[k]) {
      any = true;
      if (!RequirementMatches(req, labels, node_name, std::string_view(k) == "matchFields"))
        return false;
    }
  }
  return any;  // an empty term matches no objects
}

namespace {
const json& EmptyObject() {
  static const json kEmpty = json::object();
  return kEmpty;
}
// The node's labels without copying them (a GPU node carries ~50).
const json& NodeLabels(const json& node) {
  if (!node.is_object()) return EmptyObject();
  auto md = node.find("metadata");
  if (md == node.end() || !md->is_object()) return EmptyObject();
  auto l = md->find("labels");
  return l != md->end() && l->is_object() ? *l : EmptyObject();
}
std::string NodeName(const json& node) {
  return node.contains("metadata") && node["metadata"].is_object()
             ? node["metadata"].value("name", "")
             : "";
}
}  // namespace

bool NodeSelectorMatches(const json& pod_spec, const json& node) {
  if (!pod_spec.is_object()) return true;
  if (!pod_spec.contains("nodeSelector") && !pod_spec.contains("affinity")) return true;
  const json& labels = NodeLabels(node);
  std::string name = NodeName(node);
  if (pod_spec.contains("nodeSelector") && pod_spec["nodeSelector"].is_object())
    for (const auto& [k, v] : pod_spec["nodeSelector"].items())
      if (!labels.contains(k) || labels[k] != v) return false;
  const json* req = nullptr;
  if (pod_spec.contains("affinity") && pod_spec["affinity"].is_object()) {
    const json& a = pod_spec["affinity"];
    if (a.contains("nodeAffinity") && a["nodeAffinity"].is_object()) {
      const json& na = a["nodeAffinity"];
      if (na.contains("requiredDuringSchedulingIgnoredDuringExecution") &&
          na["requiredDuringSchedulingIgnoredDuringExecution"].is_object())
        req = &na["requiredDuringSchedulingIgnoredDuringExecution"];
    }
  }
  if (!req) return true;
  if (!req->contains("nodeSelectorTerms") || !(*req)["nodeSelectorTerms"].is_array()) return false;
  for (const auto& term : (*req)["nodeSelectorTerms"])
    if (NodeSelectorTermMatches(term, labels, name)) return true;
  return false;
}

std::int64_t PreferredAffinityScore(const json& pod_spec, const json& node) {
  if (!pod_spec.is_object() || !pod_spec.contains("affinity") || !pod_spec["affinity"].is_object())
    return 0;
  const json& a = pod_spec["affinity"];
  if (!a.contains("nodeAffinity") || !a["nodeAffinity"].is_object()) return 0;
  const json& na = a["nodeAffinity"];
  const char* k = "preferredDuringSchedulingIgnoredDuringExecution";
  if (!na.contains(k) || !na[k].is_array()) return 0;
  const json& labels = NodeLabels(node);
  std::string name = NodeName(node);
  std::int64_t score = 0;
  for (const auto& p : na[k]) {
    if (!p.is_object() || !p.contains("preference")) continue;
    std::int64_t w = p.contains("weight") && p["weight"].is_number_integer()
                         ? p["weight"].get<std::int64_t>()
                         : 0;
    if (w != 0 && NodeSelectorTermMatches(p["preference"], labels, name)) score += w;
  }
  return score;
}

NodeInfo MakeNodeInfo(const json& n) {
  NodeInfo ni;
  ni.node = {{"metadata",
              {{"name", n["metadata"].value("name", "")},
               {"labels", n["metadata"].value("labels", json::object())}}},
             {"spec", n.value("spec", json::object())}};
  std::string alloc;
  if (n.contains("status") && n["status"].contains("allocatable")) {
    const auto& a = n["status"]["allocatable"];
    if (a.contains("nvidia.com/gpu") && a["nvidia.com/gpu"].is_string())
      alloc = a["nvidia.com/gpu"];
  }
  try {
    ni.gpus = alloc.empty() ? 0 : std::stol(alloc);
  } catch (...) {
    ni.gpus = 0;
  }
  ni.schedulable = !n.value("spec", json::object()).value("unschedulable", false);
  if (n.contains("status") && n["status"].contains("conditions"))
    for (const auto& c : n["status"]["conditions"])
      if (c.value("type", "") == "Ready" && c.value("status", "") == "False")
        ni.schedulable = false;
  return ni;
}

bool PodTerminal(const json& p) {
  std::string phase = Str(p, {"status", "phase"});
  return phase == "Succeeded" || phase == "Failed";
}

bool PodActive(const json& p) {
  return !PodTerminal(p) && !p["metadata"].contains("deletionTimestamp");
}

bool PodReady(const json& p) {
  if (!p.contains("status") || !p["status"].is_object()) return false;
  const json& st = p["status"];
  if (!st.contains("conditions") || !st["conditions"].is_array()) return false;
  for (const auto& c : st["conditions"])
    if (c.is_object() && c.value("type", "") == "Ready") return c.value("status", "") == "True";
  return false;
}

std::string ConditionTransition(const json& obj, const char* type) {
  if (!obj.contains("status") || !obj["status"].is_object()) return "";
  const json& st = obj["status"];
  if (!st.contains("conditions") || !st["conditions"].is_array()) return "";
  for (const auto& c : st["conditions"])
    if (c.is_object() && c.value("type", "") == type) return Str(c, {"lastTransitionTime"});
  return "";
}

std::string ControllerUid(const json& p) {
  if (!p.contains("metadata") || !p["metadata"].is_object()) return "";
  for (const auto& r : p["metadata"].value("ownerReferences", json::array()))
    if (r.is_object() && r.value("controller", false)) return r.value("uid", "");
  return "";
}

std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& s) {
  if (s.empty()) return std::nullopt;
  auto t = ParseRfc3339(s);
  if (!t.ok()) return std::nullopt;
  return *t;
}

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  return FormatRfc3339Micro(t);
}

std::string RecordEvent(ApiCore& core, const json& regarding, const std::string& type,
                        const std::string& reason, const std::string& action,
                        const std::string& note, const std::string& controller,
                        const std::string& instance) {
  auto ri = core.registry().Find("events.k8s.io", "v1", "events");
  if (!ri) return "";
  const json& md = regarding["metadata"];
  std::string ns = md.value("namespace", "");
  if (ns.empty()) ns = "default";  // cluster-scoped objects' events live in default
  auto now = core.clock().Now();
  char hex[32];
  std::snprintf(
      hex, sizeof hex, "%llx",
      static_cast<unsigned long long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
  std::string name = md.value("name", "") + "." + hex;
  json ref = {{"apiVersion", regarding.value("apiVersion", "v1")},
              {"kind", regarding.value("kind", "")},
              {"name", md.value("name", "")},
              {"uid", md.value("uid", "")},
              {"resourceVersion", md.value("resourceVersion", "")}};
  if (md.contains("namespace")) ref["namespace"] = md["namespace"];
  json ev = {{"apiVersion", "events.k8s.io/v1"},
             {"kind", "Event"},
             {"metadata", {{"name", name}, {"namespace", ns}}},
             {"eventTime", FormatRfc3339Micro(now)},
             {"reportingController", controller},
             {"reportingInstance", instance},
             {"action", action},
             {"reason", reason},
             {"regarding", ref},
             {"note", note.size() > 1024 ? note.substr(0, 1021) + "..." : note},
             {"type", type}};
  auto r = core.Create(Target{ri, ns, "", ""}, std::move(ev), WriteOpts{});
  return r.ok() ? name : "";
}

void BumpEventSeries(ApiCore& core, const std::string& ns, const std::string& name, int count) {
  auto ri = core.registry().Find("events.k8s.io", "v1", "events");
  if (!ri) return;
  json patch = {
      {"series", {{"count", count}, {"lastObservedTime", FormatRfc3339Micro(core.clock().Now())}}}};
  core.Patch(Target{ri, ns, name, ""}, "application/merge-patch+json", patch, WriteOpts{});
}

}  // namespace gg::sim::internal

namespace gg::sim {

void AddDefaultTolerationSeconds(nlohmann::json& pod) {
  using nlohmann::json;
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) return;
  json& spec = pod["spec"];
  if (!spec.contains("tolerations") || !spec["tolerations"].is_array()) {
    if (spec.contains("tolerations") && !spec["tolerations"].is_null())
      return;  // invalid: validation says so
    spec["tolerations"] = json::array();
  }
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    bool have = false;
    for (const auto& t : spec["tolerations"]) {
      if (!t.is_object()) continue;
      std::string effect = t.value("effect", "");
      if ((effect.empty() || effect == "NoExecute") &&
          (t.value("key", "") == key || t.value("key", "").empty()))
        have = true;
    }
    if (!have)
      spec["tolerations"].push_back({{"key", key},
                                     {"operator", "Exists"},
                                     {"effect", "NoExecute"},
                                     {"tolerationSeconds", 300}});
  }
  if (spec["tolerations"].empty()) spec.erase("tolerations");
}

}  // namespace gg::sim

namespace gg::sim {

std::string PropagationFinalizer(const nlohmann::json& o) {
  if (!o.is_object()) return "";
  if (o.contains("propagationPolicy") && o["propagationPolicy"].is_string()) {
    const std::string& p = o["propagationPolicy"].get_ref<const std::string&>();
    if (p == "Foreground") return "foregroundDeletion";
    if (p == "Orphan") return "orphan";
    return "";
  }
  if (o.contains("orphanDependents") && o["orphanDependents"].is_boolean() &&
      o["orphanDependents"].get<bool>())
    return "orphan";
  return "";
}

}  // namespace gg::sim

namespace gg::sim {

void ApplyWorkloadDefaults(const std::string& group, const std::string& resource,
                           nlohmann::json& obj) {
  using nlohmann::json;
  if (group != "apps" || !obj.is_object()) return;
  if (resource != "deployments" && resource != "replicasets" && resource != "daemonsets") return;
  if (!obj.contains("spec")) obj["spec"] = json::object();
  json& spec = obj["spec"];
  if (!spec.is_object()) return;  // validation reports it
  auto dflt = [&](json& o, const char* k, json v) {
    if (!o.contains(k) || o[k].is_null()) o[k] = std::move(v);
  };
  if (resource == "replicasets") {
    dflt(spec, "replicas", 1);
    return;
  }
  dflt(spec, "revisionHistoryLimit", 10);
  const char* strategy_key = resource == "deployments" ? "strategy" : "updateStrategy";
  dflt(spec, strategy_key, json::object());
  json& st = spec[strategy_key];
  if (!st.is_object()) return;
  dflt(st, "type", "RollingUpdate");
  if (st["type"] == "RollingUpdate") {
    dflt(st, "rollingUpdate", json::object());
    if (st["rollingUpdate"].is_object()) {
      dflt(st["rollingUpdate"], "maxUnavailable",
           resource == "deployments" ? json("25%") : json(1));
      dflt(st["rollingUpdate"], "maxSurge", resource == "deployments" ? json("25%") : json(0));
    }
  }
  if (resource == "deployments") {
    dflt(spec, "replicas", 1);
    dflt(spec, "progressDeadlineSeconds", 600);
  }
}

}  // namespace gg::sim
