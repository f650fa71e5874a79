// The admission chain every create/update/patch/apply goes through, in kube-apiserver's
// order:
//   1. decoding-time mutation: custom resources are pruned (unknown fields dropped) and
//      defaulted from their structural schema; built-in defaults (pods and pod templates:
//      defaults.go), PriorityClass preemptionPolicy;
//   2. mutating admission plugins: ServiceAccount (serviceAccountName "default"), Priority
//      (spec.priority and preemptionPolicy from the PriorityClass, globalDefault, unknown
//      class refused), DefaultTolerationSeconds (not-ready / unreachable NoExecute for 300 s),
//      and the pod strategy's status.qosClass;
//   3. object validation: the caller's OpenAPI / built-in checks, then CRD CEL rules
//      (x-kubernetes-validations) and, for CRDs and ValidatingAdmissionPolicies themselves,
//      that their CEL compiles and fits the cost limits;
//   4. validating admission: ValidatingAdmissionPolicy + bindings (vap.h).
// The chain keeps its own view of PriorityClasses, policies, bindings and namespace labels,
// fed by Observe() on every commit (under the store lock), so it never reads the store.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/api_error.h"
#include "sim/registry.h"
#include "sim/vap.h"

namespace gg::sim {

struct AdmissionRequest {
  std::string operation;  // CREATE | UPDATE
  std::shared_ptr<const ResourceInfo> ri;
  std::string ns, name, sub;
  std::string user;
  std::vector<std::string> groups;
  nlohmann::json user_extra = nlohmann::json::object();
  bool dry_run = false;
  bool seed = false;  // in-process seeding: objects "already stored", validating admission skipped
};

struct AdmissionOutcome {
  std::optional<ApiError> err;
  std::vector<std::string> warnings;  // for Warning: 299 headers
};

class Admission {
 public:
  explicit Admission(std::string kube_version);
  ~Admission();

  // Runs the chain on `obj` (mutated in place). `old`: the stored object on UPDATE.
  // `validate_object`: step 3's built-in / OpenAPI validation of the mutated object.
  AdmissionOutcome Run(
      const AdmissionRequest& r, nlohmann::json& obj, const nlohmann::json* old,
      const std::function<std::optional<ApiError>(const nlohmann::json&)>& validate_object);

  // A delete's admission: ValidatingAdmissionPolicies matching DELETE see `oldObject` (the
  // stored object) and a null `object`. Seeds skip it.
  std::optional<ApiError> AdmitDelete(const AdmissionRequest& r, const nlohmann::json& old);

  // Keeps the chain's view current: called for every committed object (`obj`) or removal
  // (`obj` null) of any resource; only PriorityClasses, policies, bindings and Namespaces
  // are kept.
  void Observe(const ResourceInfo& ri, const std::string& name, const nlohmann::json* obj);

  // The PriorityClasses kube-apiserver creates at start-up (system-node-critical,
  // system-cluster-critical).
  static std::vector<nlohmann::json> BootstrapPriorityClasses();

 private:
  struct PriorityClass {
    std::int64_t value = 0;
    std::string preemption_policy = "PreemptLowerPriority";
    bool global_default = false;
  };
  std::optional<ApiError> PodPriority(const AdmissionRequest& r, nlohmann::json& pod);
  std::optional<ApiError> ValidatePriorityClass(const AdmissionRequest& r,
                                                const nlohmann::json& pc);
  // Step 4 for a request with `obj` (null on DELETE) and `old` (null on CREATE).
  VapDecision Validating(const AdmissionRequest& r, const nlohmann::json* obj,
                         const nlohmann::json* old);

  std::string kube_version_;
  mutable std::mutex mu_;
  std::map<std::string, PriorityClass> priority_classes_;
  std::map<std::string, nlohmann::json> namespaces_;  // name -> Namespace (for namespaceObject)
  VapEngine vap_;
};

// Pod defaulting (pkg/apis/core/v1/defaults.go) of a PodSpec: dnsPolicy, restartPolicy,
// terminationGracePeriodSeconds, schedulerName, securityContext, enableServiceLinks
// (pods only), containers' imagePullPolicy / terminationMessagePath / Policy, ports'
// protocol, requests from limits, volume default modes.
void SetPodSpecDefaults(nlohmann::json& spec, bool is_pod);
// status.qosClass from the containers' cpu/memory requests and limits (Guaranteed,
// Burstable, BestEffort) — pkg/apis/core/helper/qos.
std::string PodQosClass(const nlohmann::json& pod_spec);
// Kubernetes resource.Quantity -> value ("500m" -> 0.5, "1Gi" -> 1073741824); nullopt when
// malformed.
std::optional<long double> ParseQuantity(const std::string& s);

}  // namespace gg::sim
