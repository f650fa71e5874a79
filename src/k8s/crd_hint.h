// The one clear message for "our CRDs are not installed". The API server answers requests
// for a resource type it does not serve with 404 "the server could not find the requested
// resource" (no object name in the details), which clients would otherwise retry forever as
// if one object were missing.
#pragma once

#include <string>

#include "common/status.h"
#include "k8s/resource.h"

namespace gg::k8s {

// True for the API server's "resource type not served" 404 (as opposed to "object not found",
// whose message names the object).
bool IsResourceNotServed(const Status& s);

// For a gpuguardian.io type: "CustomResourceDefinition gpunodehealths.gpuguardian.io is not
// installed; install the CRDs with `kubectl apply -f deploy/crds/` (or `kubectl apply -k
// deploy/`)". For other groups: which API the server does not serve.
std::string MissingResourceHint(const ResourceType& type);

// The group our CRDs live in.
inline constexpr char kOurGroup[] = "gpuguardian.io";

}  // namespace gg::k8s
