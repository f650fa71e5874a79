// Plan(verdict, node, policy remediation, brake, now) -> the desired changes as data: the
// GPUHealthy condition, our taint, cordon/uncordon, drain work, DRA device taints, the
// remediation record and Events. Pure and idempotent: applying a plan and planning again on
// the result yields no steps. The rules it follows (ownership, admin overrides, dry run,
// recovery) are in docs/policy.md §Remediation.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "policy/evaluate.h"
#include "remediation/brake.h"
#include "remediation/record.h"

namespace gg::remediation {

// Event reasons (the catalog of ARCHITECTURE.md §2).
inline constexpr char kReasonGpuUnhealthy[] = "GPUUnhealthy";
inline constexpr char kReasonGpuRecovered[] = "GPURecovered";
inline constexpr char kReasonGpuTelemetryLost[] = "GPUTelemetryLost";
inline constexpr char kReasonNodeTainted[] = "NodeTainted";
inline constexpr char kReasonNodeCordoned[] = "NodeCordoned";
inline constexpr char kReasonNodeDrained[] = "NodeDrained";
inline constexpr char kReasonDrainBlocked[] = "DrainBlocked";
inline constexpr char kReasonNodeUncordoned[] = "NodeUncordoned";
inline constexpr char kReasonRemediationSkipped[] = "RemediationSkipped";
inline constexpr char kReasonBrakeEngaged[] = "BrakeEngaged";
inline constexpr char kReasonBrakeReleased[] = "BrakeReleased";
inline constexpr char kReasonPolicyInvalid[] = "PolicyInvalid";

// Value of our node taint: says whether the cordon is ours too, so that a node whose record
// annotation was removed can still be released correctly.
inline constexpr char kTaintValueTainted[] = "tainted";
inline constexpr char kTaintValueCordoned[] = "cordoned";

struct NodeTaint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute
  friend bool operator==(const NodeTaint&, const NodeTaint&) = default;
};

struct NodeConditionView {  // the node's current GPUHealthy condition
  std::string status;       // True | False | Unknown
  std::string reason;
  std::string message;
  friend bool operator==(const NodeConditionView&, const NodeConditionView&) = default;
};

// The few node fields planning needs (the operator fills it from its Node projection).
struct NodeView {
  std::string name;
  std::map<std::string, std::string> labels;
  bool unschedulable = false;
  std::vector<NodeTaint> taints;
  std::optional<std::string> record_annotation;  // raw gpuguardian.io/remediation
  std::optional<NodeConditionView> gpu_condition;
  // The node's GPUs are published through DRA and DeviceTaintRule is served: device-level
  // remediation is possible.
  bool dra_devices = false;
};

struct PolicyRemediation {
  std::string policy;
  api::RemediationSpec remediation;
  api::RecoverySpec recovery;
  bool dry_run = false;
  bool paused = false;
};
PolicyRemediation RemediationFor(const api::GpuHealthPolicy& policy);

enum class StepKind {
  kWriteRecord,        // record: write the annotation (always first when present)
  kSetCondition,       // status/reason/message of GPUHealthy
  kAddTaint,           // taint: add or update by key
  kRemoveTaint,        // taint.key
  kCordon,
  kUncordon,
  kAddDeviceTaint,     // gpu_uuid, effect: create the DeviceTaintRule for one GPU
  kRemoveDeviceTaint,  // gpu_uuid: delete our DeviceTaintRule for it
  kEmitEvent,          // event (on the Node)
};
std::string_view StepKindName(StepKind k);

struct PlannedEvent {
  std::string type;  // Normal | Warning
  std::string reason;
  std::string message;
  friend bool operator==(const PlannedEvent&, const PlannedEvent&) = default;
};

struct Step {
  StepKind kind = StepKind::kEmitEvent;
  std::string status, reason, message;  // kSetCondition
  NodeTaint taint;                      // kAddTaint / kRemoveTaint
  std::string gpu_uuid, effect;         // device taints (reason: the rule that fired,
                                        // message: the verdict's evidence)
  RemediationRecord record;             // kWriteRecord
  PlannedEvent event;                   // kEmitEvent
};

// Drain work for the drainer: not a change by itself (it runs until done), so it is not a step.
struct DrainRequest {
  api::DrainSpec spec;
  std::vector<std::string> gpu_uuids;  // device-level: only pods holding these GPUs
  WallTime deadline{};                 // started_at + timeout; past it -> DrainBlocked
  bool start = false;                  // first round of this occurrence's drain
};

struct RemediationPlan {
  std::vector<Step> steps;  // apply in order
  std::optional<DrainRequest> drain;
  bool stop_drain = false;       // abandon a running drain (recovery, admin uncordon)
  bool brake_blocked = false;    // new remediation held back by the brake
  bool starts_node_fence = false;
  bool starts_drain = false;
  bool ends_node_fence = false;  // for the brake ledger
  int device_fences_started = 0;
  std::optional<WallTime> requeue_at;  // the verdict's next_evaluation
  bool Empty() const { return steps.empty(); }
  std::vector<PlannedEvent> Events() const;
};

// `memories`: every selecting policy's updated EvalMemory (by policy name) to store; when
// null only verdict.memory is stored (under verdict.policy), other entries kept.
RemediationPlan Plan(const policy::Verdict& verdict, const NodeView& node,
                     const PolicyRemediation& policy, const BrakeDecision& brake, WallTime now,
                     const std::map<std::string, policy::EvalMemory>* memories = nullptr);

// The node as it would be after the plan's steps (tests, previews). Device taints and
// Events leave no trace on the node.
NodeView ApplyPlan(const NodeView& node, const RemediationPlan& plan);

}  // namespace gg::remediation
