// The resource types the simulator serves: built-ins per Kubernetes release plus the
// resources of established CRDs; lookups by URL parts and discovery documents.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gg::sim {

struct ResourceInfo {
  std::string group, version, resource, singular, kind, list_kind;
  bool namespaced = true;
  std::vector<std::string> short_names, categories;
  bool status_subresource = false;
  bool eviction = false;            // pods/eviction
  bool scale = false;               // <resource>/scale (autoscaling/v1 Scale of spec.replicas)
  bool has_generation = false;      // metadata.generation maintained
  bool custom = false;              // served from a CRD
  std::string storage;              // store key ("group/resource"); shared across versions
  std::vector<std::string> fields;  // selectable fields beyond metadata.name/namespace
  std::string crd_name;             // for custom resources
  nlohmann::json schema;            // CR: openAPIV3Schema of this version (may be null)
  nlohmann::json printer_columns;   // CR: additionalPrinterColumns
  // Non-empty: the only verbs served (the review kinds answer `create` and store nothing).
  std::vector<std::string> verbs;
  bool review = false;  // authorization/authentication reviews: evaluated, never stored

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  std::string GroupVersion() const { return ApiVersion(); }
};

class Registry {
 public:
  explicit Registry(std::string kube_version);

  // Lookup by URL parts; group "" is core. Accepts plural only (as the API server does).
  std::shared_ptr<const ResourceInfo> Find(std::string_view group, std::string_view version,
                                           std::string_view resource) const;
  // Any served version of group/resource with this kind (for in-process helpers).
  std::shared_ptr<const ResourceInfo> FindByStorage(std::string_view storage) const;
  std::shared_ptr<const ResourceInfo> FindKind(std::string_view group, std::string_view version,
                                               std::string_view kind) const;

  // Adds or replaces the resources served for a CRD (from its JSON); removes on nullopt.
  Status ApplyCrd(const nlohmann::json& crd);
  void RemoveCrd(std::string_view crd_name);

  // Discovery (legacy formats).
  nlohmann::json ApiVersions() const;   // GET /api
  nlohmann::json ApiGroupList() const;  // GET /apis
  std::optional<nlohmann::json> ApiResourceList(std::string_view group,
                                                std::string_view version) const;
  nlohmann::json AggregatedDiscovery(bool core) const;  // apidiscovery.k8s.io/v2
  // group -> versions, preferred first.
  std::vector<std::pair<std::string, std::vector<std::string>>> Groups() const;
  std::vector<std::shared_ptr<const ResourceInfo>> All() const;
  const std::string& kube_version() const { return kube_version_; }

 private:
  void AddBuiltin(ResourceInfo r);
  mutable std::mutex mu_;
  std::string kube_version_;
  std::vector<std::shared_ptr<const ResourceInfo>> resources_;  // in registration order
  std::vector<std::string> group_order_;
};

}  // namespace gg::sim
