// Fence units: what one device-level (DRA) decision fences. A bad GPU without MIG is one
// unit (its UUID). On a MIG-partitioned GPU a fault the driver confined to GPU instances
// fences the MIG devices of those instances only; any other fault on it (a level signal, an
// Xid without an instance, an Xid whose recovery resets the GPU) fences every MIG device of
// the GPU, and the GPU itself where its ResourceSlice publishes it. Pure: verdict + report in,
// units out. Mapping units to ResourceSlice devices is remediation/device_taints.h.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "api/gpu_node_health.h"
#include "policy/evaluate.h"

namespace gg::remediation {

struct FenceUnit {
  std::string uuid;      // the device's UUID: "GPU-..." or a MIG device's "MIG-..."
  std::string gpu_uuid;  // the physical GPU it is on (== uuid for a whole GPU)
  // Fenced only where published: the parent of a partitioned GPU (NVIDIA's DRA driver
  // publishes a MIG-enabled GPU through its MIG devices only).
  bool optional = false;
  bool Mig() const { return uuid != gpu_uuid; }
  friend bool operator==(const FenceUnit&, const FenceUnit&) = default;
};

// The units for the verdict's bad GPUs, in bad-GPU order. Empty unless the verdict is
// Unhealthy and not node-wide. A GPU missing from the report, or an instance the report's
// MIG devices do not list, is fenced whole.
std::vector<FenceUnit> FenceUnitsFor(const policy::Verdict& v,
                                     const api::GpuNodeHealthStatus& report);

// The units that can be fenced given the UUIDs the node's slices publish; a required unit
// not published goes to *missing (the decision is then node-level).
std::vector<FenceUnit> PublishedFenceUnits(const std::vector<FenceUnit>& units,
                                           const std::set<std::string>& published,
                                           std::vector<std::string>* missing);

}  // namespace gg::remediation
