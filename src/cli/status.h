// What `kubectl gpu-guardian status|explain` show: one row per GPU node, built from the
// Node (GPUHealthy condition, our taint, cordon, the operator's remediation record) and the
// agent's GPUNodeHealth report. Pure once the objects are fetched, so it is unit-tested.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/status.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::cli {

struct NodeRow {
  std::string node;
  std::string state;                        // Healthy | Unhealthy | Unknown | NotEvaluated
  std::string reason;                       // GPUHealthy condition reason
  std::string why;                          // condition message (evidence)
  int gpus_total = 0;                       // from the report (or capacity when no report)
  int gpus_bad = 0;                         // GPUs named by the verdict or lost in the report
  std::vector<std::string> actions;         // "tainted", "cordoned", "draining", "drained", ...
  std::optional<WallTime> since;            // condition lastTransitionTime
  std::string policy;                       // the verdict's policy (condition), else the record's
  std::optional<WallTime> report_observed;  // report observedAt
  bool excluded = false;
  std::string held_back;  // why the brake holds new remediation back ("" when it does not)
  std::vector<std::string> driver_taints;  // DriverTaintLines: taints DRA drivers published
};

// A policy whose brake is engaged (condition BrakeEngaged=True).
struct BrakeInfo {
  std::string policy;
  std::string reason;
  std::string message;
};

// The operator's Lease as the plugin found it.
struct OperatorLease {
  bool found = false;
  std::string ns, name;
  std::string holder;
  bool fresh = false;   // held and renewed within its duration
  std::string problem;  // why no operator is leading ("" when one is)
};

// Everything `status` shows.
struct ClusterStatus {
  std::vector<NodeRow> rows;
  std::vector<BrakeInfo> brakes;
  OperatorLease lease;
};

// The operator's Lease: in `ns` when given, else the first of the usual namespaces (the
// Deployment's gpu-guardian, the operator's default gpu-guardian-system, default) — by a
// cluster-wide LIST by name when allowed.
OperatorLease FindOperatorLease(k8s::RestClient& client, const std::string& ns,
                                const std::string& name, WallTime now);

// Policies with the brake engaged. FailedPrecondition with the fix when the CRDs are missing.
StatusOr<std::vector<BrakeInfo>> CollectBrakes(k8s::RestClient& client);

// Builds a row from a node and its report (nullopt: none published).
NodeRow BuildRow(const k8s::Node& node, const std::optional<api::GpuNodeHealthStatus>& report);

// Fetches all nodes with a GPU capacity or a report, and their reports. FailedPrecondition
// naming the CRD and the command that installs it when gpunodehealths is not served.
StatusOr<std::vector<NodeRow>> CollectRows(k8s::RestClient& client);

// Renders the table; `color` adds ANSI colors to the state column (TTY only); `wide` adds
// REASON and REPORTED columns and never shortens WHY.
std::string RenderTable(const std::vector<NodeRow>& rows, WallTime now, bool color,
                        bool wide = false);
// The lines under the table: engaged brakes and the nodes they hold back.
std::string RenderBrakes(const ClusterStatus& status);
nlohmann::json RowsToJson(const std::vector<NodeRow>& rows);
// RowsToJson plus "brakes" and "operator".
nlohmann::json StatusToJson(const ClusterStatus& status);

// `explain NODE`: the evidence, the rule that decided, the record and recent Events.
// agent_ns: where the agent's heartbeat Lease lives; empty: found by name in any namespace.
StatusOr<std::string> Explain(k8s::RestClient& client, const std::string& node, WallTime now,
                              const std::string& agent_ns = "");

// "3m12s" style age.
std::string Age(WallTime since, WallTime now);

}  // namespace gg::cli
