// Resource types (group/version/plural/kind/scope) and REST path building.
#pragma once

#include <string>
#include <string_view>

namespace gg::k8s {

struct ResourceType {
  std::string group;     // "" for core
  std::string version;   // "v1"
  std::string resource;  // plural, "nodes"
  std::string kind;      // "Node"
  bool namespaced = false;

  // "v1" or "apps/v1".
  std::string ApiVersion() const;
  // "/api/v1" or "/apis/apps/v1".
  std::string GroupVersionPath() const;
  // Collection: "/api/v1/pods" (ns empty: all namespaces) or "/api/v1/namespaces/ns/pods".
  std::string CollectionPath(std::string_view ns = "") const;
  // Object: ".../namespaces/ns/pods/name[/subresource]". Name segments are percent-escaped.
  std::string ObjectPath(std::string_view ns, std::string_view name,
                         std::string_view subresource = "") const;
  // "leases.coordination.k8s.io" or "nodes" (as the server's messages spell it).
  std::string QualifiedResource() const;
};

// Built-in and project resources.
extern const ResourceType kNodes;
extern const ResourceType kPods;
extern const ResourceType kPodDisruptionBudgets;  // policy/v1
extern const ResourceType kDaemonSets;            // apps/v1
extern const ResourceType kReplicaSets;           // apps/v1
extern const ResourceType kLeases;                // coordination.k8s.io/v1
extern const ResourceType kEvents;                // core v1
extern const ResourceType kNamespaces;
extern const ResourceType kGpuHealthPolicies;  // gpuguardian.io/v1alpha1, cluster-scoped
extern const ResourceType kGpuNodeHealths;     // gpuguardian.io/v1alpha1, cluster-scoped

inline constexpr char kResourceGroup[] = "resource.k8s.io";
// DRA types; the version ("v1", "v1beta2", "v1beta1") is chosen at run time from discovery
// (RestClient::PreferredVersion(kResourceGroup)).
ResourceType ResourceSlices(std::string_view version);
ResourceType ResourceClaims(std::string_view version);
ResourceType DeviceTaintRules(std::string_view version);  // cluster-scoped, alpha

// Percent-escapes a query value or path segment (RFC 3986 unreserved kept).
std::string UrlEscape(std::string_view s);

}  // namespace gg::k8s
