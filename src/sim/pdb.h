// PodDisruptionBudget arithmetic and the eviction decision, as the disruption controller
// (pkg/controller/disruption) and the eviction subresource (pkg/registry/core/pod/storage/
// eviction.go) compute them. Pure: the caller passes the PDB, the pods it selects and `now`.
//
// Pods without a controller (what we chose, following the controller since 1.26): with an
// integer minAvailable no scale is needed and expectedPods = number of selected pods. With
// maxUnavailable or a percentage minAvailable, expectedPods = the sum of the selected pods'
// controllers' desired replicas (each controller once, by uid); pods without a controller
// ownerReference are "unmanaged": left out of expectedPods (the real controller emits an
// UnmanagedPods warning event; we return their names) but still counted in currentHealthy.
// A controller whose scale is unknown makes the computation fail safe like the real
// "found no controllers for pod" error: disruptionsAllowed 0, condition
// DisruptionAllowed=False reason SyncFailed.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/selector.h"

namespace gg::sim {

struct PdbStatus {
  int expected_pods = 0;
  int current_healthy = 0;
  int desired_healthy = 0;
  int disruptions_allowed = 0;
  // Non-empty when the controller could not compute the budget (fail-safe: allowed=0).
  std::string sync_failure;                 // e.g. "found no controllers for pod \"x\""
  std::vector<std::string> unmanaged_pods;  // selected pods without a controller
  // status.disruptedPods kept: entries younger than 2 min whose pod still exists and is not
  // being deleted (name -> RFC 3339 time).
  std::map<std::string, std::string> disrupted_pods;
};

// Returns the desired replica count of the controller an ownerReference points to
// (ReplicaSet/Deployment/StatefulSet/ReplicationController scale), or nullopt if unknown.
// When no lookup is given, each controller's scale is the number of selected pods it owns
// (an approximation that is exact while the controller keeps its replicas running).
using ScaleLookup =
    std::function<std::optional<int>(const nlohmann::json& owner_ref, std::string_view ns)>;

// True when `pdb`'s spec.selector selects `pod` (same namespace; policy/v1: empty selector
// {} selects all pods in the namespace, absent/null selects none).
bool PdbSelectsPod(const nlohmann::json& pdb, const nlohmann::json& pod);

// Condition Ready=True (podutil.IsPodReady). A pod counts as healthy for a budget when it
// is ready, has no deletionTimestamp and is not in status.disruptedPods.
bool PodIsReady(const nlohmann::json& pod);

// Computes the status of `pdb` given the pods it selects (`pods` may contain other pods;
// they are filtered with PdbSelectsPod). minAvailable/maxUnavailable may be ints or "N%";
// percentages round up (GetScaledValueFromIntOrPercent(roundUp=true)) for both.
// InvalidArgument for malformed int-or-string values ("invalid value for IntOrString").
// `now_rfc3339` ages status.disruptedPods entries (2 min DeletionTimeout).
StatusOr<PdbStatus> ComputePdbStatus(const nlohmann::json& pdb,
                                     const std::vector<nlohmann::json>& pods,
                                     std::string_view now_rfc3339,
                                     const ScaleLookup& scale = nullptr);
// Same without a clock: disruptedPods entries are kept regardless of age.
StatusOr<PdbStatus> ComputePdbStatus(const nlohmann::json& pdb,
                                     const std::vector<nlohmann::json>& pods,
                                     const ScaleLookup& scale = nullptr);

// Writes `st` into a copy of `pdb`'s .status: expectedPods, currentHealthy,
// desiredHealthy, disruptionsAllowed, disruptedPods, observedGeneration =
// metadata.generation, and a DisruptionAllowed condition (SufficientPods /
// InsufficientPods / SyncFailed) whose lastTransitionTime changes only when its status does.
nlohmann::json ApplyPdbStatus(const nlohmann::json& pdb, const PdbStatus& st,
                              std::string_view now_rfc3339);

struct EvictionDecision {
  enum class Outcome {
    kAllow,            // delete the pod; write `updated_pdb` if set
    kTooManyRequests,  // 429, `status` body
    kForbidden,        // 403, `status` body
    kInternalError,    // 500, `status` body (more than one PDB)
  };
  Outcome outcome = Outcome::kAllow;
  int code = 201;         // HTTP code to answer
  nlohmann::json status;  // the Status body to answer (Success body when allowed)
  // When allowed through a budget: the PDB with disruptionsAllowed-1 and
  // status.disruptedPods[pod] = now. The server must write it (with a CAS on its RV)
  // before deleting the pod.
  std::optional<nlohmann::json> updated_pdb;
};

// Decides an eviction of `pod` given ALL the PDBs in its namespace (the function filters
// them with PdbSelectsPod). Mirrors eviction.go: terminal (Succeeded/Failed), Pending or
// already-deleting pods are allowed without a budget; >1 matching PDB → 500; a PDB whose
// status.observedGeneration < metadata.generation → 429 with retryAfterSeconds 10;
// not-ready pods pass when unhealthyPodEvictionPolicy=AlwaysAllow or the budget is met
// (currentHealthy >= desiredHealthy > 0); disruptionsAllowed 0 → 429 "The disruption
// budget NAME needs D healthy pods and has C currently".
EvictionDecision DecideEviction(const nlohmann::json& pod,
                                const std::vector<nlohmann::json>& namespace_pdbs,
                                std::string_view now_rfc3339);

// The exact 429 body for a blocked eviction (docs/reference/kubernetes-api.md, "Writes").
nlohmann::json PdbTooManyRequestsStatus(std::string_view cause_message,
                                        int retry_after_seconds = 0);
// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}
nlohmann::json EvictionSuccessStatus();

}  // namespace gg::sim
