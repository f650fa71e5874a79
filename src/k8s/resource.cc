// Resource constants and REST path building.
#include "k8s/resource.h"

namespace gg::k8s {

const ResourceType kNodes{"", "v1", "nodes", "Node", false};
const ResourceType kPods{"", "v1", "pods", "Pod", true};
const ResourceType kPodDisruptionBudgets{"policy", "v1", "poddisruptionbudgets",
                                         "PodDisruptionBudget", true};
const ResourceType kDaemonSets{"apps", "v1", "daemonsets", "DaemonSet", true};
const ResourceType kReplicaSets{"apps", "v1", "replicasets", "ReplicaSet", true};
const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease", true};
const ResourceType kEvents{"", "v1", "events", "Event", true};
const ResourceType kNamespaces{"", "v1", "namespaces", "Namespace", false};
const ResourceType kGpuHealthPolicies{"gpuguardian.io", "v1alpha1", "gpuhealthpolicies",
                                      "GPUHealthPolicy", false};
const ResourceType kGpuNodeHealths{"gpuguardian.io", "v1alpha1", "gpunodehealths", "GPUNodeHealth",
                                   false};

ResourceType ResourceSlices(std::string_view version) {
  return {kResourceGroup, std::string(version), "resourceslices", "ResourceSlice", false};
}
ResourceType ResourceClaims(std::string_view version) {
  return {kResourceGroup, std::string(version), "resourceclaims", "ResourceClaim", true};
}
ResourceType DeviceTaintRules(std::string_view version) {
  return {kResourceGroup, std::string(version), "devicetaintrules", "DeviceTaintRule", false};
}

std::string ResourceType::ApiVersion() const {
  return group.empty() ? version : group + "/" + version;
}

std::string ResourceType::GroupVersionPath() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string ResourceType::CollectionPath(std::string_view ns) const {
  std::string p = GroupVersionPath();
  if (namespaced && !ns.empty()) {
    p += "/namespaces/";
    p += UrlEscape(ns);
  }
  p += "/";
  p += resource;
  return p;
}

std::string ResourceType::ObjectPath(std::string_view ns, std::string_view name,
                                     std::string_view subresource) const {
  std::string p = CollectionPath(namespaced ? ns : std::string_view());
  p += "/";
  p += UrlEscape(name);
  if (!subresource.empty()) {
    p += "/";
    p += subresource;
  }
  return p;
}

std::string ResourceType::QualifiedResource() const {
  return group.empty() ? resource : resource + "." + group;
}

std::string UrlEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace gg::k8s
