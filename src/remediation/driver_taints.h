// Device taints the DRA driver publishes itself (KEP-5055, in its ResourceSlices) counted as
// evidence: a device the driver tainted NoSchedule or NoExecute is a bad GPU (or MIG device)
// for the node's verdict, fenced and drained like one of ours, but without a DeviceTaintRule
// of ours when the driver's taint already covers it. Pure: taints + report in, the assessment
// updated. Semantics: docs/dra.md "Taints the driver publishes".
#pragma once

#include <vector>

#include "api/gpu_node_health.h"
#include "remediation/device_taints.h"
#include "remediation/plan.h"

namespace gg::remediation {

// The rule name the driver's taints fire as (in the verdict's evidence and the record).
inline constexpr char kDriverTaintRule[] = "driverTaint";

// Evidence for the driver's taints that keep a device from pods (NoSchedule, NoExecute) on a
// device with a uuid attribute: the GPU (or, for a MIG device, its GPU confined to that
// instance) with action Drain. Effect None and unknown effects are informational: shown,
// never evidence.
std::vector<policy::Evidence> DriverTaintEvidence(const std::vector<DriverTaint>& taints,
                                                  const api::GpuNodeHealthStatus* report);

// Adds that evidence to the assessment's verdict (Unhealthy, action at least Drain, the bad
// GPUs, node-wide past maxBadGPUsForDeviceLevel, recovery hysteresis restarted: the winning
// policy's memory says Unhealthy since the first pass that saw the taint), recomputes the
// fence units, and keeps `taints` for Plan and display. Nothing happens to an excluded or
// ungoverned node, or to one without a verdict.
void FoldDriverTaints(Assessment& a, std::vector<DriverTaint> taints,
                      const api::GpuNodeHealthStatus* report, WallTime now);

}  // namespace gg::remediation
