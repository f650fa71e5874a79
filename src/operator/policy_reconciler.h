// PolicyReconciler: Reconcile(policy) — validates the policy (Invalid condition with the
// reason; no action is taken under an invalid policy, other policies are unaffected) and writes
// its status: observedGeneration, node counts (matched/healthy/unhealthy/unknown/remediating),
// conditions Ready / Invalid / BrakeEngaged (+ DeviceLevelAvailable with deviceLevel Auto) and
// lastBrakeTime. Emits PolicyInvalid, BrakeEngaged and BrakeReleased on transitions, and
// RemediationSkipped once when device-level remediation turns out to be unavailable. Writes only
// when the status changed.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "events/recorder.h"
#include "operator/cluster_view.h"
#include "operator/dra_client.h"
#include "operator/fleet_index.h"
#include "operator/metrics.h"
#include "runtime/controller.h"

namespace gg::op {

struct PolicyReconcilerDeps {
  ClusterView& view;
  PolicyStatusWriter& writer;
  events::EventRecorder& recorder;
  FleetIndex& index;
  OperatorMetrics& metrics;
  Clock& clock;
  Logger log = Logger().WithName("policy-reconciler");
  // For policies with deviceLevel Auto: condition DeviceLevelAvailable (and one
  // RemediationSkipped Event when it turns False). Null: no such condition.
  DraApi* dra = nullptr;
};

class PolicyReconciler final : public runtime::Reconciler {
 public:
  explicit PolicyReconciler(PolicyReconcilerDeps deps) : d_(std::move(deps)) {}
  StatusOr<runtime::Result> Reconcile(const std::string& policy, std::stop_token stop) override;

 private:
  // Sets (or, without deviceLevel Auto, removes) DeviceLevelAvailable; when discovery fails
  // the condition is left as it was and *result asks for a requeue.
  void DeviceLevelCondition(const api::GpuHealthPolicy& policy,
                            const api::GpuHealthPolicyStatus& current,
                            api::GpuHealthPolicyStatus& desired, const events::ObjectRef& ref,
                            WallTime now, runtime::Result* result);

  // BrakeEngaged (+ lastBrakeTime, the BrakeEngaged/BrakeReleased Events on a change, the
  // gauge) from the number of nodes the brake holds back.
  void BrakeCondition(const api::GpuHealthPolicy& policy, int64_t braked,
                      const api::GpuHealthPolicyStatus& current,
                      api::GpuHealthPolicyStatus& desired, const events::ObjectRef& ref,
                      WallTime now);

  PolicyReconcilerDeps d_;
  // Last status written per policy: an undecodable policy has no readable status to compare
  // with, and our own write comes back as an update.
  std::mutex mu_;
  std::map<std::string, api::GpuHealthPolicyStatus> written_;
  std::set<std::string> announced_;  // policies told that device level is unavailable
};

// Policy condition about device-level (DRA) remediation (policies with deviceLevel Auto).
inline constexpr char kDeviceLevelCondition[] = "DeviceLevelAvailable";

// Sets `type` in `conds` keeping lastTransitionTime when the status did not change.
void SetPolicyCondition(std::vector<api::PolicyCondition>& conds, api::PolicyCondition c);

}  // namespace gg::op
