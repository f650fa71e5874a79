// DRA device-level remediation, the pure parts: which resource.k8s.io version serves
// DeviceTaintRule (discovery documents in, a version out), mapping our report's GPU UUIDs to
// the (driver, pool, device) a node's ResourceSlices publish, the DeviceTaintRule we write for
// one bad GPU (name, labels, ownership), and which pods hold a device through their
// ResourceClaims. API shapes per release: docs/dra.md.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/objects.h"

namespace gg::remediation {

// One DRA device: what a DeviceTaintRule's deviceSelector and a claim's allocation name.
struct DeviceRef {
  std::string driver, pool, device;
  std::string ToString() const { return driver + "/" + pool + "/" + device; }  // record form
  bool empty() const { return device.empty(); }
  friend bool operator==(const DeviceRef&, const DeviceRef&) = default;
  friend auto operator<=>(const DeviceRef&, const DeviceRef&) = default;
};
// Inverse of ToString (driver names contain no '/'; pool names may): InvalidArgument on
// anything else.
StatusOr<DeviceRef> ParseDeviceRef(std::string_view s);

// ---- discovery ----

// Kubernetes version priority: GA > beta > alpha, then the higher numbers first ("v1" >
// "v1beta2" > "v1beta1" > "v1alpha3"). True when `a` is newer than `b`. Strings that are not
// Kubernetes versions sort last, alphabetically.
bool NewerApiVersion(std::string_view a, std::string_view b);

// The group's versions from GET /apis/<group> (APIGroup), in any order. InvalidArgument on a
// body that is not an APIGroup.
StatusOr<std::vector<std::string>> ParseGroupVersions(std::string_view api_group_json);

// What one GET /apis/<group>/<version> (APIResourceList) says about DRA.
struct DraResources {
  bool resource_slices = false;
  bool resource_claims = false;
  bool device_taint_rules = false;
  // devicetaintrules/status exists: the 1.35+ DeviceTaintRule, which also accepts effect None.
  bool device_taint_rule_status = false;
};
StatusOr<DraResources> ParseDraResources(std::string_view api_resource_list_json);

// ---- mapping ----

// A taint the driver itself published on one of its devices in the node's ResourceSlices
// (KEP-5055: `devices[].taints`, v1beta1 `devices[].basic.taints`). NVIDIA's DRA driver, with
// its NVMLDeviceHealthCheck gate, publishes `gpu.nvidia.com/xid=<xid>` with effect NoSchedule
// for a critical Xid and None for an application Xid, and keeps it until its kubelet plugin
// restarts. Only the driver writes its slices: gpu-guardian never changes or removes these.
struct DriverTaint {
  DeviceRef device;
  std::string uuid;  // the device's uuid attribute ("" when it publishes none)
  std::string key, value, effect;
  std::optional<WallTime> time_added;
  // "key=value:effect" (no "=" without a value)
  std::string ToString() const { return key + (value.empty() ? "" : "=" + value) + ":" + effect; }
  friend bool operator==(const DriverTaint&, const DriverTaint&) = default;
};

// How strongly a device taint effect keeps a device from pods: None (and any effect this
// release does not know, which the API says to treat as None) 0, NoSchedule 1, NoExecute 2.
inline int DeviceEffectRank(std::string_view effect) {
  return effect == "NoExecute" ? 2 : effect == "NoSchedule" ? 1 : 0;
}
// The driver's taint already does what a DeviceTaintRule of ours with `our_effect` would do:
// it keeps the device from new allocations (NoSchedule or NoExecute) and is at least as
// strong as ours. Then no rule of ours is added for the device (docs/dra.md).
inline bool DriverTaintCovers(std::string_view driver_effect, std::string_view our_effect) {
  const int rank = DeviceEffectRank(driver_effect);
  return rank >= 1 && rank >= DeviceEffectRank(our_effect);
}

struct GpuDeviceMap {
  std::map<std::string, DeviceRef> by_uuid;  // GPU UUID -> device
  std::vector<std::string> unmapped;         // asked for, not published by `driver` on the node
  // Every taint on a device of `driver` on the node, asked for or not, in slice order.
  std::vector<DriverTaint> driver_taints;
};
// Devices of `driver` in the slices of `node` (spec.nodeName) whose `uuid` attribute (plain
// or qualified "<driver>/uuid") is one of `uuids`: a GPU's "GPU-..." UUID, or a MIG device's
// own "MIG-..." UUID (NVIDIA's driver publishes each MIG device with its own uuid attribute
// and its GPU's as parentUUID). Also collects the taints on the driver's devices there.
GpuDeviceMap MapGpuDevices(const std::vector<k8s::ResourceSlice>& slices, std::string_view node,
                           std::string_view driver, const std::vector<std::string>& uuids);

// UIDs of the pods in `pods` that hold one of `devices`: a ResourceClaim named by the pod
// (same namespace) has an allocation result for the device and is reserved for that pod
// (status.reservedFor, by UID, else by name). `claims` is keyed "namespace/name".
std::set<std::string> PodsHoldingDevices(const std::vector<k8s::Pod>& pods,
                                         const std::map<std::string, k8s::ResourceClaim>& claims,
                                         const std::vector<DeviceRef>& devices);

// ---- claim status (KEP-4817) ----

// The condition we put on the status.devices[] entry of a claim allocated a fenced device.
inline constexpr char kClaimConditionType[] = "GPUHealthy";
inline constexpr char kClaimConditionReason[] = "DeviceFenced";

struct ClaimDeviceCondition {
  bool healthy = false;  // true: take our condition off again (recovery)
  std::string message;   // why (truncated to 1 KiB)
  std::string now;       // RFC 3339, the condition's lastTransitionTime
};

// The ResourceClaim `claim_json` (as read) with our condition set (or, healthy, removed) on
// the status.devices entry of each allocated device in `devices`; an entry is added when the
// driver wrote none, and an entry left with nothing of anyone's after removal is dropped.
// Other conditions and other drivers' data are kept. nullopt when nothing changes;
// InvalidArgument when the body is not a ResourceClaim. The result is for PUT .../status
// (metadata.resourceVersion kept: a concurrent writer makes it a Conflict).
StatusOr<std::optional<std::string>> ClaimWithDeviceCondition(std::string_view claim_json,
                                                              const std::vector<DeviceRef>& devices,
                                                              const ClaimDeviceCondition& c);

// ---- the DeviceTaintRule we write ----

// Ownership marks: a rule is ours only when it carries both (labels can be copied by an
// admin's tooling, so the annotation must agree too). Rules without them are never changed.
inline constexpr char kRuleManagedByLabel[] = "app.kubernetes.io/managed-by";
inline constexpr char kRuleManagedByValue[] = "gpu-guardian";
inline constexpr char kRuleNodeLabel[] = "gpuguardian.io/node";
inline constexpr char kRuleOwnerAnnotation[] = "gpuguardian.io/owner";
inline constexpr char kRuleOwnerValue[] = "gpu-guardian-operator";
inline constexpr char kRuleGpuAnnotation[] = "gpuguardian.io/gpu-uuid";
inline constexpr char kRuleReasonAnnotation[] = "gpuguardian.io/reason";

struct DeviceTaintRuleSpec {
  std::string node;
  std::string gpu_uuid;
  DeviceRef device;
  std::string reason;   // taint value: the rule that fired (made a valid label value)
  std::string effect;   // None | NoSchedule | NoExecute
  std::string message;  // evidence, kept in an annotation (truncated to 1 KiB)
  std::string policy;
};

// Deterministic, unique per device: "gpuguardian-<pool>-<device>-<8 hex of driver/pool/device>"
// (DNS subdomain; long pool names are cut, the hash keeps it unique).
std::string DeviceTaintRuleName(const DeviceRef& d);
// Taint values are label values: [A-Za-z0-9._-], alphanumeric at both ends, at most 63.
std::string ToLabelValue(std::string_view s);
// The object for POST /apis/resource.k8s.io/<version>/devicetaintrules.
std::string BuildDeviceTaintRule(std::string_view version, const DeviceTaintRuleSpec& spec);
// Both ownership marks present on a DeviceTaintRule body; false for garbage.
bool IsOurDeviceTaintRule(std::string_view rule_json);
// metadata.uid of a DeviceTaintRule body ("" when absent).
std::string RuleUid(std::string_view rule_json);

}  // namespace gg::remediation
