// Event reasons catalog: the user-facing names of every decision the operator reports, the
// one definition of each reason and its type (docs/operator.md §Events). Each reason has one
// fixed type so dashboards can filter on it. Header-only: pure code (remediation::Plan) uses
// it without linking the Event sinks.
#pragma once

#include <string_view>

namespace gg::events {

enum class EventType { kNormal, kWarning };
constexpr std::string_view EventTypeName(EventType t) {  // "Normal" | "Warning"
  return t == EventType::kWarning ? "Warning" : "Normal";
}

inline constexpr char kGPUUnhealthy[] = "GPUUnhealthy";
inline constexpr char kGPURecovered[] = "GPURecovered";
inline constexpr char kGPUTelemetryLost[] = "GPUTelemetryLost";
inline constexpr char kNodeTainted[] = "NodeTainted";
inline constexpr char kNodeCordoned[] = "NodeCordoned";
inline constexpr char kNodeDrained[] = "NodeDrained";
inline constexpr char kDrainBlocked[] = "DrainBlocked";
inline constexpr char kNodeUncordoned[] = "NodeUncordoned";
inline constexpr char kRemediationSkipped[] = "RemediationSkipped";
inline constexpr char kBrakeEngaged[] = "BrakeEngaged";
inline constexpr char kBrakeReleased[] = "BrakeReleased";
inline constexpr char kPolicyInvalid[] = "PolicyInvalid";
inline constexpr char kNodeUngoverned[] = "NodeUngoverned";
inline constexpr char kNodeQuarantined[] = "NodeQuarantined";
inline constexpr char kNodeReleased[] = "NodeReleased";
inline constexpr char kRemediationEscalated[] = "RemediationEscalated";
inline constexpr char kDeviceTaintedByDriver[] = "DeviceTaintedByDriver";

struct ReasonInfo {
  std::string_view reason;
  EventType type;
  std::string_view meaning;
};

// The whole catalog, in a fixed order (docs and tests iterate it).
inline constexpr ReasonInfo kReasons[] = {
    {kGPUUnhealthy, EventType::kWarning, "a policy rule matched the node's GPU report"},
    {kGPURecovered, EventType::kNormal, "the node was healthy for healthyFor; fencing removed"},
    {kGPUTelemetryLost, EventType::kWarning, "no or stale report: the node's GPU state is Unknown"},
    {kNodeTainted, EventType::kNormal, "the operator added its taint gpuguardian.io/unhealthy"},
    {kNodeCordoned, EventType::kNormal, "the operator set spec.unschedulable"},
    {kNodeDrained, EventType::kNormal, "all pods in the drain scope were evicted"},
    {kDrainBlocked, EventType::kWarning,
     "the drain timed out; the message names blocking pods/PDBs"},
    {kNodeUncordoned, EventType::kNormal, "the operator removed its cordon/taint"},
    {kRemediationSkipped, EventType::kNormal,
     "a remediation was decided but not applied (dry run, paused, admin)"},
    {kBrakeEngaged, EventType::kWarning,
     "the blast-radius budget is exhausted; new remediations wait"},
    {kBrakeReleased, EventType::kNormal, "back under the blast-radius budget"},
    {kPolicyInvalid, EventType::kWarning,
     "the policy failed validation; no action is taken under it"},
    {kNodeUngoverned, EventType::kWarning,
     "no policy selects a fenced node any more; released once healthy for the recorded healthyFor"},
    {kNodeQuarantined, EventType::kWarning,
     "fenced recovery.quarantine.after times within its window: held until released by hand"},
    {kNodeReleased, EventType::kNormal,
     "our fences were handed back (exclude label, kubectl gpu-guardian release)"},
    {kRemediationEscalated, EventType::kNormal,
     "after the drain, a remediation object was created from remediation.escalate.template"},
    {kDeviceTaintedByDriver, EventType::kWarning,
     "the DRA driver tainted a device itself; counted as fenced, no DeviceTaintRule of ours added"},
};

// Type of a catalog reason; kNormal for names outside the catalog.
constexpr EventType TypeOfReason(std::string_view reason) {
  for (const auto& r : kReasons) {
    if (r.reason == reason) return r.type;
  }
  return EventType::kNormal;
}

}  // namespace gg::events
