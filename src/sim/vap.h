// ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) as kube-apiserver enforces it:
// the policies and bindings the store holds, matched against each write
// (matchConstraints/matchResources: resourceRules, excludeResourceRules, operations,
// namespaceSelector, objectSelector), then matchConditions, variables and validations in CEL,
// with failurePolicy and validationActions (Deny, Warn, Audit).
// Not supported: paramKind/paramRef (params is null; a binding with a paramRef is refused
// at evaluation per failurePolicy), auditAnnotations (ignored), the `authorizer` variable.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/api_error.h"

namespace gg::cel {
class Program;
}

namespace gg::sim {

// What a policy sees of a write (AdmissionRequest, as CEL's `request` binds it).
struct VapRequest {
  std::string operation;  // CREATE UPDATE DELETE CONNECT
  std::string group, version, resource, subresource, kind;
  std::string name, ns;
  bool namespaced = true;
  std::string user;
  std::vector<std::string> groups;
  nlohmann::json extra = nlohmann::json::object();  // userInfo.extra: key -> [values]
  bool dry_run = false;
  const nlohmann::json* object = nullptr;      // null for DELETE
  const nlohmann::json* old_object = nullptr;  // null for CREATE
  const nlohmann::json* namespace_object = nullptr;
};

struct VapDecision {
  std::optional<ApiError> deny;
  std::vector<std::string> warnings;  // Warn: "Validation failed for ValidatingAdmissionPolicy ..."
};

class VapEngine {
 public:
  VapEngine();
  ~VapEngine();
  // Keeps the engine's copy current; `obj` null = removed. kind: ValidatingAdmissionPolicy
  // or ValidatingAdmissionPolicyBinding.
  void Observe(const std::string& kind, const std::string& name, const nlohmann::json* obj);
  bool empty() const;
  VapDecision Evaluate(const VapRequest& r) const;

 private:
  struct Policy;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Policy>> policies_;
  std::map<std::string, nlohmann::json> bindings_;
};

// Create/update validation of the two kinds (the parts kube-apiserver checks): required
// fields and enums, and every CEL expression compiles ("compilation failed: ERROR: ...").
std::vector<StatusCause> ValidateVapObject(const nlohmann::json& obj, const std::string& kind);

}  // namespace gg::sim
