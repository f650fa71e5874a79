// PolicyReconciler: Reconcile(policy) — validates the policy (Invalid condition with the
// reason; no action is taken under an invalid policy, other policies are unaffected) and writes
// its status: observedGeneration, node counts (matched/healthy/unhealthy/unknown/remediating),
// conditions Ready / Invalid / BrakeEngaged and lastBrakeTime. Emits PolicyInvalid,
// BrakeEngaged and BrakeReleased on transitions. Writes only when the status changed.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/log.h"
#include "events/recorder.h"
#include "operator/cluster_view.h"
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
};

class PolicyReconciler final : public runtime::Reconciler {
 public:
  explicit PolicyReconciler(PolicyReconcilerDeps deps) : d_(std::move(deps)) {}
  StatusOr<runtime::Result> Reconcile(const std::string& policy, std::stop_token stop) override;

 private:
  PolicyReconcilerDeps d_;
  // Last status written per policy: an undecodable policy has no readable status to compare
  // with, and our own write comes back as an update.
  std::mutex mu_;
  std::map<std::string, api::GpuHealthPolicyStatus> written_;
};

// Sets `type` in `conds` keeping lastTransitionTime when the status did not change.
void SetPolicyCondition(std::vector<api::PolicyCondition>& conds, api::PolicyCondition c);

}  // namespace gg::op
