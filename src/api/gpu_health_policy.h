// GPUHealthPolicy (gpuguardian.io/v1alpha1, cluster-scoped): which nodes a policy covers, the
// rules that turn GPU facts into a verdict, how to remediate, when to recover and the safety
// budget. Types, defaults, semantic validation (beyond the CRD schema) and JSON codecs.
// Reference for every field: docs/policy.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/label_selector.h"
#include "common/status.h"

namespace gg::api {

inline constexpr char kPolicyKind[] = "GPUHealthPolicy";
inline constexpr char kPolicyPlural[] = "gpuhealthpolicies";

// The remediation ladder; each step includes the ones below it (Drain = taint + cordon +
// drain). Order matters: a larger value is more severe.
enum class Action { kNone = 0, kEvent = 1, kTaint = 2, kCordon = 3, kDrain = 4 };
std::string_view ActionName(Action a);  // "None" | "Event" | "Taint" | "Cordon" | "Drain"
std::optional<Action> ParseAction(std::string_view s);

enum class TaintEffect { kNoSchedule, kPreferNoSchedule, kNoExecute };
std::string_view TaintEffectName(TaintEffect e);
std::optional<TaintEffect> ParseTaintEffect(std::string_view s);

enum class DrainScope { kGpuPods, kAllPods };
std::string_view DrainScopeName(DrainScope s);  // "GPUPods" | "AllPods"
std::optional<DrainScope> ParseDrainScope(std::string_view s);

// Device-level (DRA) remediation: Auto fences only the bad GPUs when the failure is confined
// to them and the node publishes its GPUs through DRA; Off always fences the node.
enum class DeviceLevelMode { kOff, kAuto };
std::string_view DeviceLevelModeName(DeviceLevelMode m);  // "Off" | "Auto"
std::optional<DeviceLevelMode> ParseDeviceLevelMode(std::string_view s);

// Effect of a device taint (DRA DeviceTaintRule): None only announces (served from Kubernetes
// 1.35), NoSchedule stops new allocations, NoExecute also makes kube-controller-manager delete
// the pods using the device (bypassing PodDisruptionBudgets).
enum class DeviceTaintEffect { kNone, kNoSchedule, kNoExecute };
std::string_view DeviceTaintEffectName(DeviceTaintEffect e);  // "None" | "NoSchedule" | "NoExecute"
std::optional<DeviceTaintEffect> ParseDeviceTaintEffect(std::string_view s);

// The DRA driver whose ResourceSlices publish the GPUs (NVIDIA's DRA driver).
inline constexpr char kDefaultDeviceDriver[] = "gpu.nvidia.com";

// Kubernetes IntOrString restricted to "N" or "N%".
struct IntOrPercent {
  int64_t value = 0;
  bool percent = false;
  // Absolute value against `total`. Percentages round UP (ceil), as NHC and NVSentinel do,
  // so any percentage > 0 allows at least one node; "0%" allows none.
  int64_t Resolve(int64_t total) const;
  std::string ToString() const;  // "10%" or "3"
  friend bool operator==(const IntOrPercent&, const IntOrPercent&) = default;
};
StatusOr<IntOrPercent> ParseIntOrPercent(std::string_view s);

// metav1.LabelSelector: the one definition in common/label_selector.h.
using LabelSelector = gg::LabelSelector;
using LabelSelectorRequirement = gg::LabelSelectorRequirement;

// ---- rule matchers (exactly one per rule) ----

// Xid / SXid events from the report's ring. An event matches when its code is in `codes` or
// its catalog recommendedAction is in `catalog_actions`, and its code is not in `ignore`
// (ignore always wins). `sxid` selects NVSwitch SXids instead of GPU Xids.
struct XidMatcher {
  std::vector<std::string> catalog_actions;
  std::vector<int> codes;
  std::vector<int> ignore;
  bool sxid = false;
  friend bool operator==(const XidMatcher&, const XidMatcher&) = default;
};
struct EccMatcher {  // volatile counters (since last driver load); > threshold matches
  std::optional<uint64_t> uncorrectable_volatile_above;
  std::optional<uint64_t> correctable_volatile_above;
  std::optional<uint64_t> uncorrectable_aggregate_above;
  // A rate: more than this many new correctable errors within the rule's `window` (required).
  std::optional<uint64_t> correctable_volatile_increase_above;
  friend bool operator==(const EccMatcher&, const EccMatcher&) = default;
};
struct RemappedRowsMatcher {  // any set condition matches
  bool failure = false;
  bool pending = false;
  std::optional<uint32_t> uncorrectable_above;
  friend bool operator==(const RemappedRowsMatcher&, const RemappedRowsMatcher&) = default;
};
struct RetiredPagesMatcher {  // any set condition matches
  std::optional<uint32_t> dbe_above;
  std::optional<uint32_t> sbe_above;
  bool pending = false;
  friend bool operator==(const RetiredPagesMatcher&, const RetiredPagesMatcher&) = default;
};
struct ThermalMatcher {  // any set condition matches
  std::optional<int> temperature_above_celsius;
  std::vector<std::string> throttle_reasons;  // any active reason listed matches
  friend bool operator==(const ThermalMatcher&, const ThermalMatcher&) = default;
};
// Power draw against the enforced power limit (both from NVML): matches while the draw is
// more than `over_limit_percent` percent above the limit (0: any draw above it). With `for`, a
// draw that stays over the limit says the GPU's power capping is not holding.
struct PowerMatcher {
  int over_limit_percent = 0;
  friend bool operator==(const PowerMatcher&, const PowerMatcher&) = default;
};
struct NvlinkMatcher {
  std::optional<int> links_down_above;
  std::optional<uint64_t> errors_above;
  friend bool operator==(const NvlinkMatcher&, const NvlinkMatcher&) = default;
};

// A Node condition published by another detector (node-problem-detector, a cloud's node
// health agent, DCGM health checks): matches while the node has a condition of `type` whose
// status is `status`. Node-level and node-wide. `for` counts from the condition's
// lastTransitionTime when it has one.
struct NodeConditionMatcher {
  std::string type;
  std::string status = "True";  // True | False | Unknown
  friend bool operator==(const NodeConditionMatcher&, const NodeConditionMatcher&) = default;
};
// The kubelet's own conditions whose healthy status is False (Ready's is True); the operator's
// Node cache keeps them only while they are not in that state, so no rule may ask for it.
inline constexpr const char* kKubeletPressureConditions[] = {"MemoryPressure", "DiskPressure",
                                                             "PIDPressure", "NetworkUnavailable"};

struct Rule {
  std::string name;
  // Matchers: exactly one must be set (validated).
  std::optional<XidMatcher> xid;
  std::optional<EccMatcher> ecc;
  std::optional<RemappedRowsMatcher> remapped_rows;
  std::optional<RetiredPagesMatcher> retired_pages;
  std::optional<ThermalMatcher> thermal;
  bool gpu_lost = false;     // GPU lost / fallen off the bus
  bool gpu_missing = false;  // fewer GPUs than expectedGPUs
  std::optional<NvlinkMatcher> nvlink;
  std::optional<uint64_t> pcie_replay_above;  // pcieReplayCount > N
  std::vector<std::string> recovery_actions;  // driver recovery action in this list
  std::optional<NodeConditionMatcher> node_condition;
  std::optional<PowerMatcher> power;
  // Xid rules: `count` occurrences within `window` (window absent = anything in the report).
  int64_t count = 1;
  std::optional<Duration> window;
  // Level rules: the condition must hold continuously for `for_` before the rule fires.
  std::optional<Duration> for_;
  Action action = Action::kEvent;

  int MatcherCount() const;
  bool IsXid() const { return xid.has_value(); }
  // A rule that counts within `window`: Xid rules and the correctable-ECC increase.
  bool HasWindow() const {
    return xid.has_value() || (ecc && ecc->correctable_volatile_increase_above.has_value());
  }
  friend bool operator==(const Rule&, const Rule&) = default;
};

struct UnknownSpec {
  Duration after = std::chrono::minutes(15);  // heartbeat budget
  Action action = Action::kEvent;             // Cordon/Drain only when set explicitly
  friend bool operator==(const UnknownSpec&, const UnknownSpec&) = default;
};

// One stage of the eviction order. A pod belongs to the first stage whose every set condition
// holds; an empty stage ({}) matches every pod left and must be last; pods matching no stage
// form an implicit last stage. The drainer (remediation/drainer.h) uses this type as is.
struct DrainStep {
  std::optional<int32_t> priority_below;      // pod priority (0 when unset) < this
  std::optional<LabelSelector> pod_selector;  // pod labels
  bool MatchesAll() const { return !priority_below && !pod_selector; }
  friend bool operator==(const DrainStep&, const DrainStep&) = default;
};
struct DrainSpec {
  DrainScope scope = DrainScope::kGpuPods;
  std::vector<DrainStep> order = {DrainStep{1000}, DrainStep{}};
  std::optional<int64_t> grace_period_seconds;  // absent = each pod's own
  Duration timeout = std::chrono::hours(1);     // then DrainBlocked
  bool delete_empty_dir_data = true;
  bool force = false;  // also evict pods without a controller
  friend bool operator==(const DrainSpec&, const DrainSpec&) = default;
};
// Escalation hand-off (the medik8s NodeHealthCheck remediation-template convention): a
// namespaced template object of kind <X>Template; after our drain of an occurrence finishes,
// the operator creates one <X> named after the node in the template's namespace, its spec
// copied from the template's spec.template.spec, and deletes it when the node recovers.
struct EscalationTemplate {
  std::string api_version;  // "group/version" of the template kind (a CRD: group required)
  std::string kind;         // ends in "Template"
  std::string namespace_;
  std::string name;
  // The remediation object's kind: `kind` without the "Template" suffix.
  std::string RemediationKind() const;
  friend bool operator==(const EscalationTemplate&, const EscalationTemplate&) = default;
};

struct RemediationSpec {
  TaintEffect taint_effect = TaintEffect::kNoSchedule;
  DrainSpec drain;
  DeviceLevelMode device_level = DeviceLevelMode::kOff;
  // With Auto: more bad GPUs than this makes the failure node-wide.
  int max_bad_gpus_for_device_level = 2;
  DeviceTaintEffect device_taint_effect = DeviceTaintEffect::kNoSchedule;
  std::string device_driver = kDefaultDeviceDriver;  // ResourceSlice spec.driver of the GPUs
  std::optional<EscalationTemplate> escalate;        // remediation.escalate.template; none
  // Device level: also mark the ResourceClaims holding a fenced device (KEP-4817
  // status.devices[].conditions, type GPUHealthy). Needs the optional claim-status RBAC.
  bool claim_status = false;
  friend bool operator==(const RemediationSpec&, const RemediationSpec&) = default;
};
// Repeat offenders: a node fenced `after` times within `within` stays fenced (quarantined)
// until released by hand. after 0: never.
struct QuarantineSpec {
  int after = 3;
  Duration within = std::chrono::hours(24);
  friend bool operator==(const QuarantineSpec&, const QuarantineSpec&) = default;
};
inline constexpr int kQuarantineAfterMax = 10;  // the record keeps the last 10 fence times
struct RecoverySpec {
  bool automatic = true;
  Duration healthy_for = std::chrono::minutes(10);
  QuarantineSpec quarantine;
  friend bool operator==(const RecoverySpec&, const RecoverySpec&) = default;
};
struct SafetySpec {
  IntOrPercent max_unhealthy{10, true};  // cap on nodes under remediation at once
  std::optional<int64_t> max_nodes_per_hour = 20;
  std::optional<int64_t> max_concurrent_drains = 5;
  std::optional<int64_t> max_devices_per_hour;  // device-level (DRA) fences per hour
  friend bool operator==(const SafetySpec&, const SafetySpec&) = default;
};

struct GpuHealthPolicySpec {
  LabelSelector node_selector;
  std::vector<Rule> rules;
  UnknownSpec unknown;
  RemediationSpec remediation;
  RecoverySpec recovery;
  SafetySpec safety;
  bool dry_run = false;
  bool paused = false;
  friend bool operator==(const GpuHealthPolicySpec&, const GpuHealthPolicySpec&) = default;
};

struct PolicyCondition {
  std::string type;    // Ready | Invalid | BrakeEngaged | DeviceLevelAvailable
  std::string status;  // True | False | Unknown
  std::string reason;
  std::string message;
  WallTime last_transition_time{};
  int64_t observed_generation = 0;
  friend bool operator==(const PolicyCondition&, const PolicyCondition&) = default;
};
struct GpuHealthPolicyStatus {
  int64_t observed_generation = 0;
  std::vector<PolicyCondition> conditions;
  int64_t matched_nodes = 0;
  int64_t healthy_nodes = 0;
  int64_t unhealthy_nodes = 0;
  int64_t unknown_nodes = 0;
  int64_t remediating_nodes = 0;
  std::optional<WallTime> last_brake_time;
  friend bool operator==(const GpuHealthPolicyStatus&, const GpuHealthPolicyStatus&) = default;
};

struct GpuHealthPolicy {
  std::string name;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  GpuHealthPolicySpec spec;
  GpuHealthPolicyStatus status;
};

// ---- defaults ----

// The conservative default rule set (used when spec.rules is absent): hardware faults taint
// and cordon, never drain; application Xids 13/31/43/45/68 are ignored; thermal is an Event.
std::vector<Rule> DefaultRules();
// A fully defaulted spec (selects nodes labelled nvidia.com/gpu.present=true).
GpuHealthPolicySpec DefaultPolicySpec();
// The application (user-code) Xids no default rule acts on.
inline constexpr int kApplicationXids[] = {13, 31, 43, 45, 68};

// ---- validation (what the schema cannot say) ----

struct FieldError {
  std::string path;  // "spec.rules[2].window"
  std::string message;
  friend bool operator==(const FieldError&, const FieldError&) = default;
};
// Every problem, in field order; empty when valid.
std::vector<FieldError> ValidatePolicySpec(const GpuHealthPolicySpec& spec);
// InvalidArgument listing every problem ("spec.rules[0].name: duplicate ...; ..."), or OK.
Status ValidationStatus(const std::vector<FieldError>& errors);

// ---- codecs (gpu_health_policy_codec.cc) ----

// Decodes a whole GPUHealthPolicy resource (apiVersion/kind/metadata/spec/status). Strict
// on types (InvalidArgument naming the field path), unknown fields ignored, absent fields
// defaulted. Does not run ValidatePolicySpec.
StatusOr<GpuHealthPolicy> DecodeGpuHealthPolicy(std::string_view json);
// Decodes only a `spec` object.
StatusOr<GpuHealthPolicySpec> DecodeGpuHealthPolicySpec(std::string_view spec_json);
// The whole resource (spec fully defaulted, status included).
std::string EncodeGpuHealthPolicy(const GpuHealthPolicy& policy);
// The `status` object only (for PUT/PATCH of /status).
std::string EncodeGpuHealthPolicyStatus(const GpuHealthPolicyStatus& status);

}  // namespace gg::api
