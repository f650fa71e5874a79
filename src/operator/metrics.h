// The operator's metrics, declared in one table (every series created at zero). Runtime
// (workqueue_*, controller_runtime_*), REST client and leader metrics come from runtime/.
#pragma once

#include <string>
#include <string_view>

#include "metrics/registry.h"

namespace gg::op {

inline constexpr std::string_view kResultSuccess = "success";
inline constexpr std::string_view kResultFailure = "failure";
inline constexpr std::string_view kResultDryRun = "dry_run";
inline constexpr std::string_view kResultBraked = "braked";
inline constexpr std::string_view kResultSkipped = "skipped";

struct OperatorMetrics {
  explicit OperatorMetrics(metrics::Registry& registry);

  // gpu_guardian_node_healthy{node}: 1 Healthy, 0 Unhealthy, -1 Unknown (the original design's
  // metric, plus Unknown).
  void SetNodeHealth(const std::string& node, std::string_view state);
  void ForgetNode(const std::string& node);
  // gpu_guardian_remediations_total{action,result}; action: taint|cordon|drain|untaint|uncordon|
  // device_taint|device_untaint (one DRA DeviceTaintRule created / deleted).
  void Remediation(std::string_view action, std::string_view result);

  metrics::Registry& registry;
  metrics::KeyedGaugeFamily& node_healthy;  // one series a node: kept compactly
  metrics::CounterFamily& remediations;
  metrics::GaugeFamily& nodes_by_state;           // gpu_guardian_nodes{state}
  metrics::GaugeFamily& brake_engaged;            // gpu_guardian_brake_engaged{policy}
  metrics::HistogramFamily& detection_to_action;  // gpu_guardian_detection_to_action_seconds
  metrics::CounterFamily& evictions;              // gpu_guardian_evictions_total{result}
  metrics::Gauge& drains_in_progress;             // gpu_guardian_drains_in_progress
  metrics::CounterFamily& drains;                 // gpu_guardian_drains_total{result}
  metrics::Gauge& nodes_quarantined;              // gpu_guardian_nodes_quarantined
};

}  // namespace gg::op
