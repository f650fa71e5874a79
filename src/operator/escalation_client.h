// EscalationClient: the operator's I/O for remediation.escalate (the medik8s NodeHealthCheck
// remediation-template convention). Create reads the template object (namespaced, of kind
// <X>Template), copies its spec.template.spec into a new object of kind <X> named after the
// node in the template's namespace, and POSTs it; Delete removes that object. The decision
// (when to hand a node over, when to take the object back) is remediation::Plan's.
//
// Resources: no discovery. The plural of a kind is its lowercase name plus "s" (the CRD
// convention every medik8s remediator follows: selfnoderemediationtemplates,
// fenceagentsremediations, machinedeletionremediations); a kind whose CRD spells its plural
// otherwise is not supported.
//
// Ownership: the object names the node and us by labels (app.kubernetes.io/managed-by,
// gpuguardian.io/node) and annotations (occurrence, policy, template), not by an
// ownerReference: the garbage collector must not take it away when a policy is deleted while
// the node is still fenced (the record says it is ours, and recovery deletes it).
#pragma once

#include <string>

#include "api/gpu_health_policy.h"
#include "api/gpu_node_health.h"
#include "common/status.h"
#include "k8s/resource.h"
#include "k8s/rest_client.h"
#include "remediation/record.h"

namespace gg::op {

// Who created the remediation object, for its labels and annotations.
struct EscalationOwner {
  std::string node;
  std::string occurrence;
  std::string policy;
};

class EscalationApi {
 public:
  virtual ~EscalationApi() = default;
  // Creates the remediation object from the template; one that already exists is fine.
  virtual Status Create(const api::EscalationTemplate& tmpl, const EscalationOwner& owner) = 0;
  // Deletes the object we created; one already gone is fine.
  virtual Status Delete(const remediation::EscalationRecord& rec) = 0;
};

// The REST resource of kind `kind` in `api_version` ("group/version"), namespaced, plural by
// the lowercase + "s" convention. InvalidArgument for an apiVersion without a group.
StatusOr<k8s::ResourceType> EscalationResource(const std::string& api_version,
                                               const std::string& kind);

// The remediation object built from the template object's JSON (FailedPrecondition when the
// template has no spec.template.spec object).
StatusOr<std::string> BuildRemediationObject(const api::EscalationTemplate& tmpl,
                                             const EscalationOwner& owner,
                                             std::string_view template_json);

class EscalationClient final : public EscalationApi {
 public:
  explicit EscalationClient(k8s::RestClient& client) : client_(client) {}
  Status Create(const api::EscalationTemplate& tmpl, const EscalationOwner& owner) override;
  Status Delete(const remediation::EscalationRecord& rec) override;

 private:
  k8s::RestClient& client_;
};

}  // namespace gg::op
