// Missing-CRD detection and hint (see crd_hint.h).
#include "k8s/crd_hint.h"

namespace gg::k8s {

bool IsResourceNotServed(const Status& s) {
  return IsNotFound(s) &&
         s.message().find("could not find the requested resource") != std::string::npos;
}

std::string MissingResourceHint(const ResourceType& type) {
  const std::string full = type.resource + (type.group.empty() ? "" : "." + type.group);
  if (type.group == kOurGroup)
    return "CustomResourceDefinition " + full +
           " is not installed; install the CRDs with `kubectl apply -f deploy/crds/` "
           "(or everything with `kubectl apply -k deploy/`)";
  return "the API server does not serve " + full + " (" + type.ApiVersion() + ")";
}

}  // namespace gg::k8s
