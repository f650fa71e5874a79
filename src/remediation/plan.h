// Plan: the one place a node decision is made. The reconciler reads its caches into a
// NodeInput; Assess() evaluates every selecting policy and resolves one verdict; Plan() turns
// verdict + node state + record (+ the brake and whether DRA can fence single GPUs) into one
// typed NodeChange: the GPUHealthy condition, our taint, cordon/uncordon, DRA device taints to
// create or delete, the remediation record, Events (catalog reasons with their catalog type),
// drain work and when to look again. Pure and idempotent: applying a change and planning again
// on the result yields an empty change. The rules it follows (ownership, admin overrides, the
// exclude label, dry run, recovery) are in docs/policy.md §4 "What the operator does".
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "common/status.h"
#include "events/reasons.h"
#include "policy/evaluate.h"
#include "remediation/brake.h"
#include "remediation/device_taints.h"
#include "remediation/fence_units.h"
#include "remediation/record.h"

namespace gg::remediation {

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
  bool unschedulable = false;
  std::vector<NodeTaint> taints;
  std::optional<std::string> record_annotation;  // raw gpuguardian.io/remediation
  std::optional<NodeConditionView> gpu_condition;
  // The node's GPUs are published through DRA and DeviceTaintRule is served: device-level
  // remediation is possible.
  bool dra_devices = false;
  // Device level: what to fence (GPUs, or MIG devices of a partitioned GPU). Empty: each
  // bad GPU whole.
  std::vector<FenceUnit> fence_units;
  // The DRA driver's own taints on the node's devices (read in the same LIST): a unit the
  // driver already fences gets no DeviceTaintRule of ours (DriverTaintCovers).
  std::vector<DriverTaint> driver_taints;
};

// Why Plan acts on a node no policy governs (kGoverned: a policy selects it).
enum class Governance {
  kGoverned,
  kUngoverned,  // no policy selects the fenced node: hold, release once healthy (recorded settings)
  kExcluded,    // gpuguardian.io/exclude=true: release everything of ours at once
  kReleased,    // `kubectl gpu-guardian release`: hand the node back now
};

struct PolicyRemediation {
  std::string policy;
  api::RemediationSpec remediation;
  api::RecoverySpec recovery;
  bool dry_run = false;
  bool paused = false;
  Governance governance = Governance::kGoverned;
  std::string release_reason;  // kReleased: the administrator's --reason
};
PolicyRemediation RemediationFor(const api::GpuHealthPolicy& policy);

// An Event on the Node: a catalog reason (events/reasons.h) with the catalog's type.
struct PlannedEvent {
  events::EventType type = events::EventType::kNormal;
  std::string reason;
  std::string message;
  friend bool operator==(const PlannedEvent&, const PlannedEvent&) = default;
};

// One GPU's DRA DeviceTaintRule to create or delete.
struct DeviceTaintChange {
  std::string gpu_uuid;
  std::string effect;     // create: None | NoSchedule | NoExecute
  std::string reason;     // create: the rule that fired (the taint's value)
  std::string message;    // create: the verdict's evidence
  std::string rule_name;  // delete: our rule, from the record ("" = never created)
};

// Drain work for the drainer: not a change by itself (it runs until done).
struct DrainRequest {
  api::DrainSpec spec;
  std::vector<std::string> gpu_uuids;  // device-level: only pods holding these GPUs
  WallTime deadline{};                 // started_at + timeout; past it -> DrainBlocked
  bool start = false;                  // first round of this occurrence's drain
};

// Everything one pass changes on one node, as data. The apply layer writes the Node fields
// in one PATCH (record first in intent: it says what is ours), the condition through
// nodes/status, the DRA rules before the PATCH, then the Events, then the drain.
struct NodeChange {
  std::optional<RemediationRecord> record;     // write our record annotation
  std::optional<NodeTaint> set_taint;          // add or update our taint (by key)
  bool remove_taint = false;                   // remove our taint
  std::optional<bool> unschedulable;           // cordon (true) / uncordon (false)
  std::optional<NodeConditionView> condition;  // GPUHealthy
  std::vector<DeviceTaintChange> delete_device_taints;
  std::vector<DeviceTaintChange> create_device_taints;
  std::vector<PlannedEvent> events;
  // remediation.escalate: hand the drained node to an external remediator (create the object
  // from the template; AlreadyExists is fine), or delete the one we created (NotFound is fine).
  std::optional<api::EscalationTemplate> create_escalation;
  std::optional<EscalationRecord> delete_escalation;

  std::optional<DrainRequest> drain;
  bool stop_drain = false;     // abandon a running drain (recovery, admin uncordon, exclusion)
  bool forget_drain = false;   // the record no longer says Running: drop a finished outcome
  std::string drain_recorded;  // "Done" | "Blocked": a finished drain's outcome recorded now

  // What the pass decided beyond writes (metrics, the fleet index, logs).
  bool excluded = false;       // opted out by label: nothing decided, nothing written
  bool brake_blocked = false;  // new remediation held back by the brake
  bool starts_node_fence = false;
  bool starts_drain = false;
  bool ends_node_fence = false;  // for the brake ledger
  int device_fences_started = 0;
  std::optional<WallTime> requeue_at;  // the verdict's next_evaluation

  bool WritesNode() const { return record || set_taint || remove_taint || unschedulable; }
  // Nothing to write and nothing to announce (drain work is not a change).
  bool Empty() const {
    return !WritesNode() && !condition && delete_device_taints.empty() &&
           create_device_taints.empty() && events.empty() && !create_escalation &&
           !delete_escalation;
  }
};

// `memories`: every selecting policy's updated EvalMemory (by policy name) to store; when
// null only verdict.memory is stored (under verdict.policy), other entries kept.
NodeChange Plan(const policy::Verdict& verdict, const NodeView& node,
                const PolicyRemediation& policy, const BrakeDecision& brake, WallTime now,
                const std::map<std::string, policy::EvalMemory>* memories = nullptr);

// `kubectl gpu-guardian release NODE --reason TEXT`: removes our taint and our cordon now (never
// an administrator's), ends the occurrence's remediation (cancelled: nothing more is done
// until a new fault), lifts a quarantine and forgets the fence history, and records who asked
// and why. DRA rules and a running drain of ours are left in the record: the operator's next
// pass removes and stops them. An empty change when nothing of ours is on the node.
NodeChange PlanRelease(const NodeView& node, const std::string& reason, WallTime now);

// Whether the node holds anything of ours (an active occurrence, our taint, cordon, DRA rules
// or drain), from its record (nullopt: none or unreadable) and its taints.
bool HoldsOurs(const NodeView& node, const std::optional<RemediationRecord>& record);

// The node as it would be after the change (tests, previews). Device taints and Events leave
// no trace on the node.
NodeView ApplyChange(const NodeView& node, const NodeChange& change);

// --- The whole decision for one node, from what the caches hold ---

// A drain of ours that finished (the drain runner's result, not recorded yet).
struct DrainOutcome {
  bool done = false;       // all pods in scope gone; else Blocked (timed out, unevictable pods)
  bool timed_out = false;  // Blocked because the drain's deadline passed
  std::string state;       // "Done" | "Blocked"
  std::string message;     // one line, naming the pods left and why
};

// One node as the caches show it.
struct NodeInput {
  NodeView node;
  std::optional<std::string> exclude_label;  // value of gpuguardian.io/exclude, if set
  // The GPUNodeHealth status (or the legacy annotation). NotFound: no report; another error:
  // a report that cannot be read (-> Unknown).
  StatusOr<api::GpuNodeHealthStatus> report = NotFoundError("no report");
  std::vector<const api::GpuHealthPolicy*> policies;       // valid policies selecting the node
  std::vector<policy::NodeConditionFact> node_conditions;  // for nodeCondition rules
  std::optional<DrainOutcome> drain;  // the drain runner's finished outcome, if any
};

// Assess: the verdict half of the decision (exclusion, Evaluate per policy, Resolve).
struct Assessment {
  bool excluded = false;
  // No valid policy selects the node but it holds fences of ours: `verdict` judges the report
  // under the built-in rules and the recovery settings recorded at the fence, and `policy`
  // points at that synthetic policy (owned by `ungoverned_policy`).
  bool ungoverned = false;
  std::shared_ptr<const api::GpuHealthPolicy> ungoverned_policy;
  std::optional<policy::Verdict> verdict;              // nullopt: excluded, or no policy selects it
  const api::GpuHealthPolicy* policy = nullptr;        // the winning policy
  std::map<std::string, policy::EvalMemory> memories;  // per selecting policy, to store
  std::map<std::string, policy::HealthState> states;   // per selecting policy
  std::optional<RemediationRecord> record;  // ours, decoded (nullopt: none or unreadable)

  // The verdict may start a fence: the brake must be consulted (under its lock).
  bool MayStartFence() const { return verdict && verdict->action >= api::Action::kTaint; }
  // Device level: the units (GPUs or MIG devices) a GPU-confined Unhealthy verdict fences.
  std::vector<FenceUnit> fence_units;
  // UUIDs of the required fence units without a device taint of ours yet (GPU UUIDs, or MIG
  // device UUIDs on a partitioned GPU).
  std::vector<std::string> GpusToFence() const;
  // The units (required or optional) without a device taint of ours yet.
  std::vector<FenceUnit> UnfencedUnits() const;
  // Their UUIDs: what to look up in the ResourceSlices.
  std::vector<std::string> DevicesToMap() const;
  bool HoldsDeviceTaints() const { return record && !record->device_taints.empty(); }
  // The DRA driver's taints on the node's devices, when they were read (FoldDriverTaints).
  std::vector<DriverTaint> driver_taints;
};
Assessment Assess(const NodeInput& in, WallTime now);

// What Plan needs from outside the caches: the brake for the winning policy (when
// MayStartFence) and whether the node's GPUs can be fenced one by one through DRA.
struct Lookups {
  BrakeDecision brake = BrakeAllowAll();
  bool dra_devices = false;
  // The fence units found published in the node's ResourceSlices (set when they were
  // listed). Absent: the assessment's required units.
  std::optional<std::vector<FenceUnit>> fence_units;
};

// Whether the exclude label's value opts the node out of remediation (the one definition).
bool ExcludedByLabel(std::optional<std::string_view> value);

NodeChange Plan(const NodeInput& in, const Assessment& assessment, const Lookups& lookups,
                WallTime now);

}  // namespace gg::remediation
