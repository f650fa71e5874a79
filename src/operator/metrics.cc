// Operator metric declarations.
#include "operator/metrics.h"

namespace gg::op {

OperatorMetrics::OperatorMetrics(metrics::Registry& r)
    : registry(r),
      node_healthy(r.AddKeyedGauge("gpu_guardian_node_healthy",
                                   "GPU health of a node as the operator judges it: 1 Healthy, 0 "
                                   "Unhealthy, -1 Unknown.",
                                   "node")),
      remediations(r.AddCounter("gpu_guardian_remediations_total",
                                "Remediation actions decided, by action and result "
                                "(success, failure, dry_run, braked, skipped).",
                                {"action", "result"})),
      nodes_by_state(r.AddGauge("gpu_guardian_nodes",
                                "Nodes selected by a policy, by GPU state (Healthy, Unhealthy, "
                                "Unknown, Remediating, Excluded).",
                                {"state"})),
      brake_engaged(r.AddGauge("gpu_guardian_brake_engaged",
                               "1 while a policy's blast-radius brake holds back new remediations.",
                               {"policy"})),
      detection_to_action(
          r.AddHistogram("gpu_guardian_detection_to_action_seconds",
                         "Time from the report's observedAt to the operator's first fencing write.",
                         {}, {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300})),
      evictions(r.AddCounter("gpu_guardian_evictions_total",
                             "Pod evictions attempted by drains, by result (success, pdb_blocked, "
                             "not_found, error).",
                             {"result"})),
      drains_in_progress(r.AddGauge("gpu_guardian_drains_in_progress",
                                    "Drains currently running in this operator.")
                             .WithLabels({})),
      drains(r.AddCounter("gpu_guardian_drains_total",
                          "Finished drains by result (Done, Blocked, Cancelled).", {"result"})),
      nodes_quarantined(r.AddGauge("gpu_guardian_nodes_quarantined",
                                   "Nodes held fenced as repeat offenders "
                                   "(recovery.quarantine) until released by hand.")
                            .WithLabels({})) {
  for (auto action : {"taint", "cordon", "drain", "untaint", "uncordon", "event", "device_taint",
                      "device_untaint", "claim_status", "claim_status_clear"}) {
    for (auto result :
         {kResultSuccess, kResultFailure, kResultDryRun, kResultBraked, kResultSkipped}) {
      remediations.WithLabels({action, result});
    }
  }
  for (auto state : {"Healthy", "Unhealthy", "Unknown", "Remediating", "Excluded"}) {
    nodes_by_state.WithLabels({state});
  }
  for (auto result : {"success", "pdb_blocked", "not_found", "error"})
    evictions.WithLabels({result});
  for (auto result : {"Done", "Blocked", "Cancelled"}) drains.WithLabels({result});
}

void OperatorMetrics::SetNodeHealth(const std::string& node, std::string_view state) {
  double v = state == "Healthy" ? 1 : state == "Unhealthy" ? 0 : -1;
  node_healthy.Set(node, v);
}

void OperatorMetrics::ForgetNode(const std::string& node) { node_healthy.Remove(node); }

void OperatorMetrics::Remediation(std::string_view action, std::string_view result) {
  remediations.WithLabels({action, result}).Inc();
}

}  // namespace gg::op
