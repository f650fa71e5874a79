// Built-in resource table (per --kube-version), CRD-served resources and discovery.
#include "sim/registry.h"

#include <algorithm>

namespace gg::sim {

namespace {

const std::vector<std::string> kVerbs = {"create", "delete", "deletecollection", "get",
                                         "list",   "patch",  "update",           "watch"};

ResourceInfo R(std::string group, std::string version, std::string resource, std::string singular,
               std::string kind, bool namespaced, std::vector<std::string> shorts = {}) {
  ResourceInfo r;
  r.group = std::move(group);
  r.version = std::move(version);
  r.resource = std::move(resource);
  r.singular = std::move(singular);
  r.kind = std::move(kind);
  r.list_kind = r.kind + "List";
  r.namespaced = namespaced;
  r.short_names = std::move(shorts);
  r.storage = (r.group.empty() ? std::string("core") : r.group) + "/" + r.resource;
  return r;
}

int MinorOf(const std::string& v) {
  auto dot = v.find('.');
  if (dot == std::string::npos) return 35;
  try {
    return std::stoi(v.substr(dot + 1));
  } catch (...) {
    return 35;
  }
}

// The core (v1) resources.
std::vector<ResourceInfo> CoreResources() {
  std::vector<ResourceInfo> out;
  {
    auto r = R("", "v1", "nodes", "node", "Node", false, {"no"});
    r.status_subresource = true;
    r.fields = {"spec.unschedulable"};
    out.push_back(r);
  }
  {
    auto r = R("", "v1", "pods", "pod", "Pod", true, {"po"});
    r.status_subresource = true;
    r.eviction = true;
    r.has_generation = true;
    r.categories = {"all"};
    r.fields = {
        "spec.nodeName",    "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase",       "status.podIP",       "status.nominatedNodeName"};
    out.push_back(r);
  }
  {
    auto r = R("", "v1", "namespaces", "namespace", "Namespace", false, {"ns"});
    r.status_subresource = true;
    r.fields = {"status.phase"};
    out.push_back(r);
  }
  {
    auto r = R("", "v1", "events", "event", "Event", true, {"ev"});
    r.storage = "events";
    r.fields = {"involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type"};
    out.push_back(r);
  }
  out.push_back(R("", "v1", "configmaps", "configmap", "ConfigMap", true, {"cm"}));
  out.push_back(R("", "v1", "secrets", "secret", "Secret", true));
  {
    auto r = R("", "v1", "services", "service", "Service", true, {"svc"});
    r.status_subresource = true;
    r.categories = {"all"};
    out.push_back(r);
  }
  out.push_back(R("", "v1", "endpoints", "endpoints", "Endpoints", true, {"ep"}));
  out.push_back(R("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, {"sa"}));
  return out;
}

// apps, policy, batch, coordination and events.k8s.io.
std::vector<ResourceInfo> WorkloadResources() {
  std::vector<ResourceInfo> out;
  for (auto [res, sing, kind, shorts] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"daemonsets", "daemonset", "DaemonSet", "ds"},
           {"deployments", "deployment", "Deployment", "deploy"},
           {"replicasets", "replicaset", "ReplicaSet", "rs"}}) {
    auto r = R("apps", "v1", res, sing, kind, true, {shorts});
    r.status_subresource = true;
    r.has_generation = true;
    r.categories = {"all"};
    r.scale = res != "daemonsets";
    out.push_back(r);
  }
  {
    auto r = R("policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget",
               true, {"pdb"});
    r.status_subresource = true;
    r.has_generation = true;
    out.push_back(r);
  }
  {
    auto r = R("batch", "v1", "jobs", "job", "Job", true);
    r.status_subresource = true;
    r.has_generation = true;
    r.categories = {"all"};
    out.push_back(r);
  }
  out.push_back(R("coordination.k8s.io", "v1", "leases", "lease", "Lease", true));
  {
    auto r = R("events.k8s.io", "v1", "events", "event", "Event", true, {"ev"});
    r.storage = "events";
    out.push_back(r);
  }
  return out;
}

// CRDs, RBAC, the access reviews, priority classes and admission policies.
std::vector<ResourceInfo> ControlResources() {
  std::vector<ResourceInfo> out;
  {
    auto r = R("apiextensions.k8s.io", "v1", "customresourcedefinitions",
               "customresourcedefinition", "CustomResourceDefinition", false, {"crd", "crds"});
    r.status_subresource = true;
    r.has_generation = true;
    out.push_back(r);
  }
  out.push_back(
      R("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false));
  out.push_back(R("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
                  "ClusterRoleBinding", false));
  out.push_back(R("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true));
  out.push_back(
      R("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true));
  // Reviews: POSTed, evaluated, answered, never stored (create is their only verb).
  for (auto [group, res, kind, ns] :
       std::vector<std::tuple<std::string, std::string, std::string, bool>>{
           {"authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false},
           {"authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", false},
           {"authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", true},
           {"authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", false}}) {
    std::string singular = res.substr(0, res.size() - 1);
    auto r = R(group, "v1", res, singular, kind, ns);
    r.verbs = {"create"};
    r.review = true;
    out.push_back(r);
  }
  out.push_back(R("scheduling.k8s.io", "v1", "priorityclasses", "priorityclass", "PriorityClass",
                  false, {"pc"}));
  // ValidatingAdmissionPolicy: admissionregistration.k8s.io/v1, GA (served by default) since
  // 1.30, so in every release we simulate; enforced by sim/vap.h.
  auto p = R("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
             "validatingadmissionpolicy", "ValidatingAdmissionPolicy", false);
  p.status_subresource = true;
  p.has_generation = true;
  p.categories = {"api-extensions"};
  out.push_back(p);
  auto b = R("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
             "validatingadmissionpolicybinding", "ValidatingAdmissionPolicyBinding", false);
  b.has_generation = true;
  b.categories = {"api-extensions"};
  out.push_back(b);
  return out;
}

// resource.k8s.io (docs/reference/dra.md) in release 1.<minor>: preferred version first.
std::vector<ResourceInfo> DraResources(int minor) {
  std::vector<ResourceInfo> out;
  std::vector<std::string> dra_versions;
  if (minor >= 34) dra_versions.push_back("v1");
  dra_versions.push_back("v1beta2");
  dra_versions.push_back("v1beta1");
  if (minor < 33) dra_versions = {"v1beta1"};
  for (const auto& v : dra_versions) {
    out.push_back(
        R("resource.k8s.io", v, "resourceslices", "resourceslice", "ResourceSlice", false));
    auto c = R("resource.k8s.io", v, "resourceclaims", "resourceclaim", "ResourceClaim", true);
    c.status_subresource = true;
    c.has_generation = true;
    out.push_back(c);
    out.push_back(R("resource.k8s.io", v, "deviceclasses", "deviceclass", "DeviceClass", false));
  }
  std::vector<std::string> dtr_versions;
  if (minor >= 36) dtr_versions.push_back("v1beta2");
  if (minor >= 33) dtr_versions.push_back("v1alpha3");
  for (const auto& v : dtr_versions) {
    auto r =
        R("resource.k8s.io", v, "devicetaintrules", "devicetaintrule", "DeviceTaintRule", false);
    r.status_subresource = minor >= 35;
    r.has_generation = true;
    out.push_back(r);
  }
  return out;
}

}  // namespace

Registry::Registry(std::string kube_version) : kube_version_(std::move(kube_version)) {
  const int minor = MinorOf(kube_version_);
  for (auto* table : {CoreResources, WorkloadResources, ControlResources})
    for (auto& r : table()) AddBuiltin(std::move(r));
  for (auto& r : DraResources(minor)) AddBuiltin(std::move(r));
}

void Registry::AddBuiltin(ResourceInfo r) {
  std::string g = r.group;
  if (std::find(group_order_.begin(), group_order_.end(), g) == group_order_.end())
    group_order_.push_back(g);
  resources_.push_back(std::make_shared<const ResourceInfo>(std::move(r)));
}

std::shared_ptr<const ResourceInfo> Registry::Find(std::string_view group, std::string_view version,
                                                   std::string_view resource) const {
  std::scoped_lock lock(mu_);
  for (const auto& r : resources_)
    if (r->group == group && r->version == version && r->resource == resource) return r;
  return nullptr;
}

std::shared_ptr<const ResourceInfo> Registry::FindByStorage(std::string_view storage) const {
  std::scoped_lock lock(mu_);
  for (const auto& r : resources_)
    if (r->storage == storage) return r;
  return nullptr;
}

std::shared_ptr<const ResourceInfo> Registry::FindKind(std::string_view group,
                                                       std::string_view version,
                                                       std::string_view kind) const {
  std::scoped_lock lock(mu_);
  for (const auto& r : resources_)
    if (r->group == group && r->version == version && r->kind == kind) return r;
  return nullptr;
}

std::vector<std::shared_ptr<const ResourceInfo>> Registry::All() const {
  std::scoped_lock lock(mu_);
  return resources_;
}

Status Registry::ApplyCrd(const nlohmann::json& crd) {
  const auto& spec = crd.value("spec", nlohmann::json::object());
  std::string group = spec.value("group", "");
  const auto& names = spec.value("names", nlohmann::json::object());
  std::string plural = names.value("plural", "");
  std::string kind = names.value("kind", "");
  if (group.empty() || plural.empty() || kind.empty())
    return InvalidArgumentError("CRD needs spec.group, spec.names.plural and spec.names.kind");
  std::string crd_name = crd.value("metadata", nlohmann::json::object()).value("name", "");
  std::vector<std::shared_ptr<const ResourceInfo>> add;
  const auto versions = spec.value("versions", nlohmann::json::array());
  // Storage/preferred order: the API server sorts by version priority; keep the CRD order
  // but put the storage version first so discovery prefers it.
  for (const auto& v : versions) {
    if (!v.is_object() || !v.value("served", true)) continue;
    ResourceInfo r;
    r.group = group;
    r.version = v.value("name", "");
    r.resource = plural;
    r.singular = names.value("singular", "");
    if (r.singular.empty()) {
      r.singular = kind;
      std::transform(r.singular.begin(), r.singular.end(), r.singular.begin(), ::tolower);
    }
    r.kind = kind;
    r.list_kind = names.value("listKind", kind + "List");
    r.namespaced = spec.value("scope", "Namespaced") == "Namespaced";
    if (names.contains("shortNames") && names["shortNames"].is_array())
      for (const auto& s : names["shortNames"])
        if (s.is_string()) r.short_names.push_back(s.get<std::string>());
    if (names.contains("categories") && names["categories"].is_array())
      for (const auto& s : names["categories"])
        if (s.is_string()) r.categories.push_back(s.get<std::string>());
    r.status_subresource = v.contains("subresources") && v["subresources"].is_object() &&
                           v["subresources"].contains("status");
    r.has_generation = true;
    r.custom = true;
    r.storage = group + "/" + plural;
    r.crd_name = crd_name;
    if (v.contains("schema") && v["schema"].is_object())
      r.schema = v["schema"].value("openAPIV3Schema", nlohmann::json());
    r.printer_columns = v.value("additionalPrinterColumns", nlohmann::json::array());
    bool storage = v.value("storage", false);
    auto p = std::make_shared<const ResourceInfo>(std::move(r));
    if (storage)
      add.insert(add.begin(), p);
    else
      add.push_back(p);
  }
  std::scoped_lock lock(mu_);
  std::erase_if(resources_, [&](const auto& r) { return r->custom && r->crd_name == crd_name; });
  for (auto& p : add) resources_.push_back(p);
  if (std::find(group_order_.begin(), group_order_.end(), group) == group_order_.end())
    group_order_.push_back(group);
  return OkStatus();
}

void Registry::RemoveCrd(std::string_view crd_name) {
  std::scoped_lock lock(mu_);
  std::erase_if(resources_, [&](const auto& r) { return r->custom && r->crd_name == crd_name; });
}

std::vector<std::pair<std::string, std::vector<std::string>>> Registry::Groups() const {
  std::scoped_lock lock(mu_);
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& g : group_order_) {
    std::vector<std::string> versions;
    for (const auto& r : resources_)
      if (r->group == g &&
          std::find(versions.begin(), versions.end(), r->version) == versions.end())
        versions.push_back(r->version);
    if (!versions.empty()) out.emplace_back(g, std::move(versions));
  }
  return out;
}

nlohmann::json Registry::ApiVersions() const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs",
           {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1:6443"}}}}};
}

nlohmann::json Registry::ApiGroupList() const {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [g, versions] : Groups()) {
    if (g.empty()) continue;
    nlohmann::json vs = nlohmann::json::array();
    for (const auto& v : versions) vs.push_back({{"groupVersion", g + "/" + v}, {"version", v}});
    groups.push_back({{"name", g},
                      {"versions", vs},
                      {"preferredVersion",
                       {{"groupVersion", g + "/" + versions[0]}, {"version", versions[0]}}}});
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

std::optional<nlohmann::json> Registry::ApiResourceList(std::string_view group,
                                                        std::string_view version) const {
  nlohmann::json list = nlohmann::json::array();
  bool any = false;
  for (const auto& r : All()) {
    if (r->group != group || r->version != version) continue;
    any = true;
    nlohmann::json e = {{"name", r->resource},
                        {"singularName", r->singular},
                        {"namespaced", r->namespaced},
                        {"kind", r->kind},
                        {"verbs", r->verbs.empty() ? kVerbs : r->verbs}};
    if (!r->short_names.empty()) e["shortNames"] = r->short_names;
    if (!r->categories.empty()) e["categories"] = r->categories;
    list.push_back(e);
    if (r->status_subresource)
      list.push_back({{"name", r->resource + "/status"},
                      {"singularName", ""},
                      {"namespaced", r->namespaced},
                      {"kind", r->kind},
                      {"verbs", {"get", "patch", "update"}}});
    if (r->scale)
      list.push_back({{"name", r->resource + "/scale"},
                      {"singularName", ""},
                      {"namespaced", r->namespaced},
                      {"group", "autoscaling"},
                      {"version", "v1"},
                      {"kind", "Scale"},
                      {"verbs", {"get", "patch", "update"}}});
    if (r->eviction)
      list.push_back({{"name", r->resource + "/eviction"},
                      {"singularName", ""},
                      {"namespaced", r->namespaced},
                      {"group", "policy"},
                      {"version", "v1"},
                      {"kind", "Eviction"},
                      {"verbs", {"create"}}});
  }
  if (!any) return std::nullopt;
  nlohmann::json doc = {
      {"kind", "APIResourceList"},
      {"groupVersion",
       group.empty() ? std::string(version) : std::string(group) + "/" + std::string(version)},
      {"resources", list}};
  if (!group.empty()) doc["apiVersion"] = "v1";
  return doc;
}

nlohmann::json Registry::AggregatedDiscovery(bool core) const {
  nlohmann::json items = nlohmann::json::array();
  auto all = All();
  for (const auto& [g, versions] : Groups()) {
    if (core != g.empty()) continue;
    nlohmann::json vs = nlohmann::json::array();
    for (const auto& v : versions) {
      nlohmann::json res = nlohmann::json::array();
      for (const auto& r : all) {
        if (r->group != g || r->version != v) continue;
        nlohmann::json e = {{"resource", r->resource},
                            {"responseKind", {{"group", ""}, {"version", ""}, {"kind", r->kind}}},
                            {"scope", r->namespaced ? "Namespaced" : "Cluster"},
                            {"singularResource", r->singular},
                            {"verbs", r->verbs.empty() ? kVerbs : r->verbs}};
        if (!r->short_names.empty()) e["shortNames"] = r->short_names;
        if (!r->categories.empty()) e["categories"] = r->categories;
        nlohmann::json subs = nlohmann::json::array();
        if (r->status_subresource)
          subs.push_back({{"subresource", "status"},
                          {"responseKind", {{"group", ""}, {"version", ""}, {"kind", r->kind}}},
                          {"verbs", {"get", "patch", "update"}}});
        if (r->scale)
          subs.push_back(
              {{"subresource", "scale"},
               {"responseKind", {{"group", "autoscaling"}, {"version", "v1"}, {"kind", "Scale"}}},
               {"verbs", {"get", "patch", "update"}}});
        if (r->eviction)
          subs.push_back(
              {{"subresource", "eviction"},
               {"responseKind", {{"group", "policy"}, {"version", "v1"}, {"kind", "Eviction"}}},
               {"verbs", {"create"}}});
        if (!subs.empty()) e["subresources"] = subs;
        res.push_back(e);
      }
      vs.push_back({{"version", v}, {"freshness", "Current"}, {"resources", res}});
    }
    nlohmann::json md = {{"creationTimestamp", nullptr}};
    if (!g.empty()) md["name"] = g;
    items.push_back({{"metadata", md}, {"versions", vs}});
  }
  return {{"apiVersion", "apidiscovery.k8s.io/v2"},
          {"kind", "APIGroupDiscoveryList"},
          {"metadata", nlohmann::json::object()},
          {"items", items}};
}

}  // namespace gg::sim
