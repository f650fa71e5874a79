// The admission chain (see admission.h): defaulting, Priority, DefaultTolerationSeconds,
// QoS class, CRD structural pruning/defaulting and CEL rules, ValidatingAdmissionPolicy.
#include "sim/admission.h"

#include <cmath>
#include <set>

#include "sim/schema.h"
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr std::int64_t kHighestUserDefinablePriority = 1000000000;
constexpr std::int64_t kSystemCriticalPriority = 2 * kHighestUserDefinablePriority;

bool IsCorePods(const ResourceInfo& ri) { return ri.group.empty() && ri.resource == "pods"; }
bool IsPriorityClass(const ResourceInfo& ri) {
  return ri.group == "scheduling.k8s.io" && ri.resource == "priorityclasses";
}
bool IsVapKind(const ResourceInfo& ri) {
  return ri.group == "admissionregistration.k8s.io" &&
         (ri.resource == "validatingadmissionpolicies" ||
          ri.resource == "validatingadmissionpolicybindings");
}

bool Absent(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ||
         (it->is_string() && it->get_ref<const std::string&>().empty());
}

// Sets obj[key] when it is absent, null or "" (the value is built only then).
template <class T>
void SetIfAbsent(json& obj, const char* key, T&& value) {
  if (Absent(obj, key)) obj[key] = std::forward<T>(value);
}

// Always for ":latest" or no tag (and no digest), else IfNotPresent.
std::string DefaultPullPolicy(const std::string& image) {
  if (image.find('@') != std::string::npos) return "IfNotPresent";
  auto slash = image.rfind('/');
  auto colon = image.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return "Always";
  return image.substr(colon + 1) == "latest" ? "Always" : "IfNotPresent";
}

void SetContainerDefaults(json& c, bool is_pod) {
  if (!c.is_object()) return;
  SetIfAbsent(c, "terminationMessagePath", "/dev/termination-log");
  SetIfAbsent(c, "terminationMessagePolicy", "File");
  if (Absent(c, "imagePullPolicy"))
    if (auto img = c.find("image"); img != c.end() && img->is_string())
      c["imagePullPolicy"] = DefaultPullPolicy(img->get_ref<const std::string&>());
  if (auto p = c.find("ports"); p != c.end() && p->is_array())
    for (auto& port : *p)
      if (port.is_object()) SetIfAbsent(port, "protocol", "TCP");
  // A limit without a request requests the limit (SetDefaults_Pod; pods only).
  if (is_pod) {
    if (auto r = c.find("resources"); r != c.end() && r->is_object()) {
      if (auto l = r->find("limits"); l != r->end() && l->is_object() && !l->empty()) {
        json& req = (*r)["requests"];
        if (!req.is_object()) req = json::object();
        for (auto it = l->begin(); it != l->end(); ++it)
          if (!req.contains(it.key())) req[it.key()] = *it;
      }
    }
  }
}

void SetVolumeDefaults(json& v) {
  if (!v.is_object()) return;
  for (const char* k : {"secret", "configMap", "projected", "downwardAPI"})
    if (auto s = v.find(k); s != v.end() && s->is_object()) SetIfAbsent(*s, "defaultMode", 420);
  if (auto h = v.find("hostPath"); h != v.end() && h->is_object() && !h->contains("type"))
    (*h)["type"] = "";
}

const std::string& Str(const json& o, const char* k) {
  static const std::string kEmpty;
  if (!o.is_object()) return kEmpty;
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get_ref<const std::string&>() : kEmpty;
}

}  // namespace

void SetPodSpecDefaults(json& spec, bool is_pod) {
  if (!spec.is_object()) return;
  SetIfAbsent(spec, "dnsPolicy", "ClusterFirst");
  SetIfAbsent(spec, "restartPolicy", "Always");
  SetIfAbsent(spec, "schedulerName", "default-scheduler");
  if (!spec.contains("terminationGracePeriodSeconds") ||
      spec["terminationGracePeriodSeconds"].is_null())
    spec["terminationGracePeriodSeconds"] = 30;
  if (!spec.contains("securityContext") || spec["securityContext"].is_null())
    spec["securityContext"] = json::object();
  if (is_pod && (!spec.contains("enableServiceLinks") || spec["enableServiceLinks"].is_null()))
    spec["enableServiceLinks"] = true;
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"})
    if (auto cs = spec.find(list); cs != spec.end() && cs->is_array())
      for (auto& c : *cs) SetContainerDefaults(c, is_pod);
  if (auto vs = spec.find("volumes"); vs != spec.end() && vs->is_array())
    for (auto& v : *vs) SetVolumeDefaults(v);
}

std::optional<long double> ParseQuantity(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::size_t i = 0;
  if (s[i] == '+' || s[i] == '-') ++i;
  std::size_t digits = i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == digits) return std::nullopt;
  long double v;
  try {
    v = std::stold(s.substr(0, i));
  } catch (...) {
    return std::nullopt;
  }
  std::string suffix = s.substr(i);
  static const std::map<std::string, long double> kMult = {{"", 1},
                                                           {"n", 1e-9L},
                                                           {"u", 1e-6L},
                                                           {"m", 1e-3L},
                                                           {"k", 1e3L},
                                                           {"M", 1e6L},
                                                           {"G", 1e9L},
                                                           {"T", 1e12L},
                                                           {"P", 1e15L},
                                                           {"E", 1e18L},
                                                           {"Ki", 1024.0L},
                                                           {"Mi", 1048576.0L},
                                                           {"Gi", 1073741824.0L},
                                                           {"Ti", 1099511627776.0L},
                                                           {"Pi", 1125899906842624.0L},
                                                           {"Ei", 1152921504606846976.0L}};
  if (auto it = kMult.find(suffix); it != kMult.end()) return v * it->second;
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    try {
      std::size_t used = 0;
      int e = std::stoi(suffix.substr(1), &used);
      if (used == suffix.size() - 1) return v * std::pow(10.0L, e);
    } catch (...) {
    }
  }
  return std::nullopt;
}

std::string PodQosClass(const json& spec) {
  std::map<std::string, long double> requests, limits;
  bool guaranteed = true;
  auto supported = [](const std::string& r) { return r == "cpu" || r == "memory"; };
  auto add = [&](const json& list, std::map<std::string, long double>& into,
                 std::set<std::string>* found) {
    if (!list.is_object()) return;
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (!supported(it.key())) continue;
      std::optional<long double> q;
      if (it->is_string())
        q = ParseQuantity(it->get<std::string>());
      else if (it->is_number())
        q = it->get<double>();
      if (!q || *q == 0) continue;
      if (found) found->insert(it.key());
      into[it.key()] += *q;
    }
  };
  for (const char* list : {"containers", "initContainers"}) {
    const json cs = spec.is_object() ? spec.value(list, json::array()) : json::array();
    if (!cs.is_array()) continue;
    for (const auto& c : cs) {
      json res = c.is_object() ? c.value("resources", json::object()) : json::object();
      if (!res.is_object()) res = json::object();
      add(res.value("requests", json()), requests, nullptr);
      std::set<std::string> limits_found;
      add(res.value("limits", json()), limits, &limits_found);
      if (!limits_found.count("cpu") || !limits_found.count("memory")) guaranteed = false;
    }
  }
  if (requests.empty() && limits.empty()) return "BestEffort";
  if (guaranteed) {
    for (const auto& [name, req] : requests) {
      auto l = limits.find(name);
      if (l == limits.end() || std::fabs(static_cast<double>(l->second - req)) >
                                   1e-9 * std::max(1.0, static_cast<double>(req)))
        guaranteed = false;
    }
    if (requests.size() != limits.size()) guaranteed = false;
  }
  return guaranteed ? "Guaranteed" : "Burstable";
}

Admission::Admission(std::string kube_version) : kube_version_(std::move(kube_version)) {}
Admission::~Admission() = default;

std::vector<json> Admission::BootstrapPriorityClasses() {
  return {
      {{"apiVersion", "scheduling.k8s.io/v1"},
       {"kind", "PriorityClass"},
       {"metadata", {{"name", "system-node-critical"}}},
       {"value", kSystemCriticalPriority + 1000},
       {"description",
        "Used for system critical pods that must not be moved from their current node."},
       {"preemptionPolicy", "PreemptLowerPriority"}},
      {{"apiVersion", "scheduling.k8s.io/v1"},
       {"kind", "PriorityClass"},
       {"metadata", {{"name", "system-cluster-critical"}}},
       {"value", kSystemCriticalPriority},
       {"description",
        "Used for system critical pods that must run in the cluster, but can be moved to another "
        "node if necessary."},
       {"preemptionPolicy", "PreemptLowerPriority"}},
  };
}

void Admission::Observe(const ResourceInfo& ri, const std::string& name, const json* obj) {
  if (IsPriorityClass(ri)) {
    std::scoped_lock lock(mu_);
    if (!obj) {
      priority_classes_.erase(name);
      return;
    }
    PriorityClass pc;
    if (auto v = obj->find("value"); v != obj->end() && v->is_number_integer())
      pc.value = v->get<std::int64_t>();
    pc.preemption_policy = obj->value("preemptionPolicy", "PreemptLowerPriority");
    pc.global_default = obj->value("globalDefault", false);
    priority_classes_[name] = pc;
  } else if (ri.group.empty() && ri.resource == "namespaces") {
    std::scoped_lock lock(mu_);
    if (obj)
      namespaces_[name] = *obj;
    else
      namespaces_.erase(name);
  } else if (IsVapKind(ri)) {
    vap_.Observe(ri.kind, name, obj);
  }
}

std::optional<ApiError> Admission::PodPriority(const AdmissionRequest& r, json& pod) {
  json& spec = pod["spec"];
  if (!spec.is_object()) return std::nullopt;  // validation reports it
  std::string name = Str(spec, "priorityClassName");
  std::int64_t priority = 0;
  std::string policy = "PreemptLowerPriority";
  auto forbidden = [&](const std::string& why) {
    ApiError e = ForbiddenErr("pods \"" + r.name + "\" is forbidden: " + why);
    e.name = r.name;
    e.kind = "pods";
    return e;
  };
  {
    std::scoped_lock lock(mu_);
    if (name.empty()) {
      const std::pair<const std::string, PriorityClass>* best = nullptr;
      for (const auto& kv : priority_classes_)
        if (kv.second.global_default && (!best || best->second.value < kv.second.value)) best = &kv;
      if (best) {
        name = best->first;
        priority = best->second.value;
        policy = best->second.preemption_policy;
        spec["priorityClassName"] = name;
      }
    } else {
      auto it = priority_classes_.find(name);
      if (it == priority_classes_.end())
        return forbidden("no PriorityClass with name " + name + " was found");
      priority = it->second.value;
      policy = it->second.preemption_policy;
    }
  }
  if (auto p = spec.find("priority");
      p != spec.end() && p->is_number_integer() && p->get<std::int64_t>() != priority)
    return forbidden("the integer value of priority (" + std::to_string(p->get<std::int64_t>()) +
                     ") must not be provided in pod spec; priority admission controller computed " +
                     std::to_string(priority) + " from the given PriorityClass name");
  spec["priority"] = priority;
  if (auto p = spec.find("preemptionPolicy");
      p != spec.end() && p->is_string() && p->get<std::string>() != policy)
    return forbidden("the string value of PreemptionPolicy (" + p->get<std::string>() +
                     ") must not be provided in pod spec; priority admission controller computed " +
                     policy + " from the given PriorityClass name");
  spec["preemptionPolicy"] = policy;
  return std::nullopt;
}

std::optional<ApiError> Admission::ValidatePriorityClass(const AdmissionRequest& r,
                                                         const json& pc) {
  std::vector<StatusCause> causes;
  const std::string name = r.name;
  std::int64_t value =
      pc.contains("value") && pc["value"].is_number_integer() ? pc["value"].get<std::int64_t>() : 0;
  if (name.rfind("system-", 0) == 0) {
    bool known = false;
    for (const auto& b : BootstrapPriorityClasses())
      if (b["metadata"]["name"] == name && b["value"] == value) known = true;
    if (!known)
      causes.push_back(ForbiddenCause("metadata.name",
                                      "priority class names with 'system-' prefix are reserved"));
  } else if (value > kHighestUserDefinablePriority) {
    causes.push_back(
        ForbiddenCause("value", "maximum allowed value of a user defined priority is " +
                                    std::to_string(kHighestUserDefinablePriority)));
  }
  std::string pp = Str(pc, "preemptionPolicy");
  if (pp != "PreemptLowerPriority" && pp != "Never")
    causes.push_back(NotSupportedCause("preemptionPolicy", pp, {"Never", "PreemptLowerPriority"}));
  if (!causes.empty())
    return InvalidErr("PriorityClass", "scheduling.k8s.io", name, std::move(causes));
  if (pc.value("globalDefault", false)) {
    std::scoped_lock lock(mu_);
    for (const auto& [other, c] : priority_classes_)
      if (other != name && c.global_default) {
        ApiError e = ForbiddenErr("priorityclasses.scheduling.k8s.io \"" + name +
                                  "\" is forbidden: PriorityClass " + other +
                                  " is already marked as default. Only one default can exist");
        e.name = name;
        e.group = "scheduling.k8s.io";
        e.kind = "priorityclasses";
        return e;
      }
  }
  return std::nullopt;
}

namespace {

// Decoding: structural pruning and defaulting of custom resources, built-in defaults.
void ApplyDecodingDefaults(const ResourceInfo& ri, bool main_resource, json& obj) {
  if (ri.custom && ri.schema.is_object()) {
    PruneUnknownFields(obj, ri.schema, true);
    ApplyStructuralDefaults(obj, ri.schema);
  }
  if (ri.group.empty() && ri.resource == "nodes" && main_resource && obj.is_object() &&
      (!obj.contains("spec") || obj["spec"].is_null())) {
    obj["spec"] = json::object();  // NodeSpec is a struct: always serialized
  }
  if (IsCorePods(ri) && obj.contains("spec")) {
    SetPodSpecDefaults(obj["spec"], true);
  } else if ((ri.group == "apps" || ri.group == "batch") && obj.contains("spec") &&
             obj["spec"].is_object() && obj["spec"].contains("template") &&
             obj["spec"]["template"].is_object() && obj["spec"]["template"].contains("spec")) {
    SetPodSpecDefaults(obj["spec"]["template"]["spec"], false);
  } else if (IsPriorityClass(ri) && obj.is_object()) {
    SetIfAbsent(obj, "preemptionPolicy", "PreemptLowerPriority");
  }
}

// DefaultTolerationSeconds: tolerate not-ready / unreachable for 300 s unless the pod
// already tolerates them (a toleration with that key or no key, effect NoExecute or none).
void AddDefaultTolerations(json& spec) {
  json& tols = spec["tolerations"];
  if (!tols.is_array()) tols = json::array();
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    bool has = false;
    for (const auto& t : tols) {
      const std::string &k = Str(t, "key"), &eff = Str(t, "effect");
      if ((k == key || k.empty()) && (eff == "NoExecute" || eff.empty())) has = true;
    }
    if (!has)
      tols.push_back({{"key", key},
                      {"operator", "Exists"},
                      {"effect", "NoExecute"},
                      {"tolerationSeconds", 300}});
  }
}

// Object validation: the caller's result `err`, then the CEL rules of custom resources, CRDs
// and ValidatingAdmissionPolicies. The error to answer with, if any.
std::optional<ApiError> ValidateObjectRules(const AdmissionRequest& r, const json& obj,
                                            const json* old, std::optional<ApiError> err) {
  const ResourceInfo& ri = *r.ri;
  const bool main_resource = r.sub.empty();
  std::vector<StatusCause> cel;
  if (ri.custom && ri.schema.is_object()) {
    bool type_errors = false;
    if (err)
      for (const auto& c : err->causes)
        if (c.reason == "FieldValueTypeInvalid") type_errors = true;
    if (err && err->code != 422) return err;
    if (type_errors) {
      err->causes.push_back({"FieldValueInvalid",
                             "Invalid value: \"object\": some validation rules were not checked "
                             "because the object was "
                             "invalid; correct the existing errors to complete validation",
                             "<nil>"});
      return InvalidErr(ri.kind, ri.group, r.name, std::move(err->causes));
    }
    cel = ValidateCelRules(obj, old, ri.schema);
  } else if (ri.group == "apiextensions.k8s.io" && ri.resource == "customresourcedefinitions" &&
             main_resource) {
    cel = ValidateCrdValidationRules(obj);
  } else if (IsVapKind(ri) && main_resource) {
    cel = ValidateVapObject(obj, ri.kind);
  }
  if (!cel.empty()) {
    std::vector<StatusCause> all = err ? std::move(err->causes) : std::vector<StatusCause>{};
    for (auto& c : cel) all.push_back(std::move(c));
    return InvalidErr(ri.kind, ri.group, r.name, std::move(all));
  }
  return err;
}

}  // namespace

AdmissionOutcome Admission::Run(
    const AdmissionRequest& r, json& obj, const json* old,
    const std::function<std::optional<ApiError>(const json&)>& validate_object) {
  AdmissionOutcome out;
  const ResourceInfo& ri = *r.ri;
  const bool main_resource = r.sub.empty();
  // 1. Decoding: structural pruning + defaulting of custom resources, built-in defaults.
  ApplyDecodingDefaults(ri, main_resource, obj);
  // 2. Mutating admission plugins.
  if (IsCorePods(ri) && main_resource && r.operation == "CREATE" && obj.contains("spec") &&
      obj["spec"].is_object()) {
    json& spec = obj["spec"];
    // ServiceAccount: the namespace's "default" account.
    SetIfAbsent(spec, "serviceAccountName", "default");
    spec["serviceAccount"] = spec["serviceAccountName"];
    if (auto e = PodPriority(r, obj)) {
      out.err = std::move(e);
      return out;
    }
    AddDefaultTolerations(spec);
    // The pod strategy's PrepareForCreate: status.qosClass.
    json& status = obj["status"];
    if (!status.is_object()) status = json::object();
    if (!r.seed || !status.contains("qosClass")) status["qosClass"] = PodQosClass(spec);
  }
  if (IsPriorityClass(ri) && main_resource) {
    if (auto e = ValidatePriorityClass(r, obj)) {
      out.err = std::move(e);
      return out;
    }
  }
  // 3. Object validation: the caller's checks, then CEL.
  if (auto e = ValidateObjectRules(r, obj, old, validate_object(obj))) {
    out.err = std::move(e);
    return out;
  }
  // 4. Validating admission.
  if (r.seed || vap_.empty()) return out;
  VapDecision d = Validating(r, &obj, old);
  out.warnings = std::move(d.warnings);
  if (d.deny) out.err = std::move(d.deny);
  return out;
}

std::optional<ApiError> Admission::AdmitDelete(const AdmissionRequest& r, const json& old) {
  if (r.seed || vap_.empty()) return std::nullopt;
  return Validating(r, nullptr, &old).deny;
}

VapDecision Admission::Validating(const AdmissionRequest& r, const json* obj, const json* old) {
  const ResourceInfo& ri = *r.ri;
  VapRequest vr;
  vr.operation = r.operation;
  vr.group = ri.group;
  vr.version = ri.version;
  vr.resource = ri.resource;
  vr.subresource = r.sub;
  vr.kind = ri.kind;
  vr.name = r.name;
  vr.ns = ri.namespaced ? r.ns : "";
  vr.namespaced = ri.namespaced;
  vr.user = r.user;
  vr.groups = r.groups;
  vr.extra = r.user_extra.is_object() ? r.user_extra : json::object();
  vr.dry_run = r.dry_run;
  vr.object = obj;
  vr.old_object = old;
  json ns_obj;
  if (ri.namespaced && !r.ns.empty()) {
    std::scoped_lock lock(mu_);
    if (auto it = namespaces_.find(r.ns); it != namespaces_.end()) ns_obj = it->second;
  }
  if (!ns_obj.is_null()) vr.namespace_object = &ns_obj;
  return vap_.Evaluate(vr);
}

}  // namespace gg::sim
