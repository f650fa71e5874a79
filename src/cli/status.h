// What `kubectl gpu-guardian status|explain` show: one row per GPU node, built from the
// Node (GPUHealthy condition, our taint, cordon, the operator's remediation record) and the
// agent's GPUNodeHealth report. Pure once the objects are fetched, so it is unit-tested.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/status.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::cli {

struct NodeRow {
  std::string node;
  std::string state;   // Healthy | Unhealthy | Unknown | NotEvaluated
  std::string reason;  // GPUHealthy condition reason
  std::string why;     // condition message (evidence)
  int gpus_total = 0;  // from the report (or capacity when no report)
  int gpus_bad = 0;    // GPUs named by the verdict or lost in the report
  std::vector<std::string> actions;  // "tainted", "cordoned", "draining", "drained", ...
  std::optional<WallTime> since;     // condition lastTransitionTime
  std::string policy;                // from the remediation record
  std::optional<WallTime> report_observed;  // report observedAt
  bool excluded = false;
};

// Builds a row from a node and its report (nullopt: none published).
NodeRow BuildRow(const k8s::Node& node, const std::optional<api::GpuNodeHealthStatus>& report);

// Fetches all nodes with a GPU capacity or a report, and their reports.
StatusOr<std::vector<NodeRow>> CollectRows(k8s::RestClient& client);

// Renders the table; `color` adds ANSI colors to the state column (TTY only).
std::string RenderTable(const std::vector<NodeRow>& rows, WallTime now, bool color);
nlohmann::json RowsToJson(const std::vector<NodeRow>& rows);

// `explain NODE`: the evidence, the rule that decided, the record and recent Events.
StatusOr<std::string> Explain(k8s::RestClient& client, const std::string& node, WallTime now);

// "3m12s" style age.
std::string Age(WallTime since, WallTime now);

}  // namespace gg::cli
