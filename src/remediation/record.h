// RemediationRecord: the operator's idempotency record, stored as compact JSON in the Node
// annotation `gpuguardian.io/remediation`. It says what we did (taint, cordon, drain, device
// taints), why (rules, evidence), when, under which policy and occurrence, and which changes
// are OURS — only those are ever undone, so an admin's cordon or taint is never touched. It
// also carries each policy's EvalMemory so decisions survive operator restarts.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "common/status.h"
#include "policy/memory.h"

namespace gg::remediation {

inline constexpr int kRecordVersion = 1;
// Fence times kept for repeat-offender detection (recovery.quarantine.after is at most this).
inline constexpr size_t kFenceHistoryMax = 10;

enum class DrainPhase { kNone, kRunning, kCompleted, kBlocked, kCancelled };
std::string_view DrainPhaseName(DrainPhase p);  // "None" | "Running" | "Completed" | ...
std::optional<DrainPhase> ParseDrainPhase(std::string_view s);

struct DrainRecord {
  DrainPhase phase = DrainPhase::kNone;
  std::optional<WallTime> started_at;
  std::optional<WallTime> finished_at;
  std::string message;  // Blocked: pods left and the last error
  friend bool operator==(const DrainRecord&, const DrainRecord&) = default;
};

// One device-level (DRA) fence: a DeviceTaintRule we created for one bad GPU, or a device
// the driver tainted itself.
struct DeviceTaintRecord {
  std::string gpu_uuid;
  std::string effect;     // None | NoSchedule | NoExecute
  std::string rule_name;  // DeviceTaintRule object name, set by the operator once created
  WallTime since{};
  std::string device;  // "<driver>/<pool>/<device>" it selects, set with rule_name
  // Set when the DRA driver's own taint ("key=value:effect") already fences the device: no
  // rule of ours exists for it (rule_name stays empty, `device` is set) and recovery only
  // forgets the entry — the driver's taint is never ours to remove.
  std::string driver_taint;
  // remediation.claimStatus: the ResourceClaims ("namespace/name") our condition was written
  // on when the device was fenced, so recovery clears them even after their pods are gone.
  std::vector<std::string> claims;
  friend bool operator==(const DeviceTaintRecord&, const DeviceTaintRecord&) = default;
};

// The remediation object we created for the occurrence (remediation.escalate): enough to
// delete it on recovery even after the policy changed.
struct EscalationRecord {
  std::string api_version;  // of the remediation kind (the template's apiVersion)
  std::string kind;         // the template kind without "Template"
  std::string namespace_;   // the template's namespace
  std::string name;         // the node's name
  friend bool operator==(const EscalationRecord&, const EscalationRecord&) = default;
};

struct RemediationRecord {
  int version = kRecordVersion;
  // Last verdict state announced (drives once-per-transition Events). Empty: none yet.
  std::string state;
  // The current occurrence: an episode from the first unhealthy verdict to recovery.
  std::string occurrence;                   // "" when none is active
  std::string policy;                       // policy whose verdict drove it
  api::Action action = api::Action::kNone;  // highest step reached (never lowered)
  std::vector<std::string> rules;           // matched rules
  std::string reason;                       // evidence summary (<= 1 KiB)
  std::vector<std::string> bad_gpus;
  bool node_wide = false;
  std::optional<WallTime> started_at;
  std::optional<WallTime> updated_at;
  bool dry_run = false;  // decided under dryRun: nothing below was actually done

  // Ownership: set only when WE made the change.
  bool tainted = false;
  std::string taint_effect;
  bool cordoned = false;
  DrainRecord drain;
  std::vector<DeviceTaintRecord> device_taints;
  // The remediation object handed to an external remediator after the drain (ours to delete).
  std::optional<EscalationRecord> escalation;

  // An admin uncordoned our cordon: nothing more is done for this occurrence.
  bool cancelled = false;
  std::optional<WallTime> cancelled_at;
  // Why new remediation is held back (brake), so the Event is emitted once.
  std::string skipped;
  std::optional<WallTime> recovered_at;  // end of the last occurrence

  std::map<std::string, policy::EvalMemory> memory;  // per policy name

  // The recovery settings of the policy the node was last fenced under (kept up to date while
  // a policy governs the node): a node no policy governs any more is released by them.
  std::optional<Duration> healthy_for;
  bool automatic_recovery = true;
  // Set while no policy governs the fenced node (the ungoverned Event is emitted once).
  std::optional<WallTime> ungoverned_since;
  // When each of the last occurrences first fenced the node (oldest first, at most
  // kFenceHistoryMax): recovery.quarantine counts them.
  std::vector<WallTime> fences;
  // Fenced too often: held until `kubectl gpu-guardian release` (or the exclude label).
  bool quarantined = false;
  std::optional<WallTime> quarantined_at;
  // The last hand-back by `kubectl gpu-guardian release`: why, and when.
  std::string released_reason;
  std::optional<WallTime> released_at;

  bool Active() const { return !occurrence.empty(); }
  friend bool operator==(const RemediationRecord&, const RemediationRecord&) = default;
};

std::string EncodeRecord(const RemediationRecord& r);
// Garbage or a newer version -> InvalidArgument (the planner then treats the node as having
// no record, i.e. re-onboards it). Unknown fields are ignored.
StatusOr<RemediationRecord> DecodeRecord(std::string_view json);

// Updates the operator applies when the drainer reports an outcome; they return the Event
// reason to emit ("NodeDrained" / "DrainBlocked").
std::string MarkDrainCompleted(RemediationRecord& r, WallTime now);
std::string MarkDrainBlocked(RemediationRecord& r, std::string message, WallTime now);

}  // namespace gg::remediation
