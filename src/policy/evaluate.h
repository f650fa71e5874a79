// Evaluate(policy, report, memory, now) -> Verdict: the pure decision core. Turns one node's
// GPUNodeHealth report into Healthy / Unhealthy / Unknown under one GPUHealthPolicy, with
// per-GPU evidence, pending `for` timers, the next time to look again and updated memory.
// Resolve() picks one verdict when several policies select a node. No I/O, no clock reads.
// Semantics (windows over aggregated Xids, hysteresis, Unknown paths): docs/policy.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/gpu_health_policy.h"
#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/status.h"
#include "policy/memory.h"

namespace gg::policy {

// Why a verdict is Unknown (kNone otherwise).
enum class UnknownCause { kNone, kNoReport, kInvalidReport, kStaleReport, kTelemetryUnavailable };
std::string_view UnknownCauseName(UnknownCause c);  // "NoReport", "StaleReport", ...

// A MIG GPU instance (and, when the driver named one, compute instance) a fault was
// confined to.
struct MigInstance {
  uint32_t gpu_instance = 0;
  std::optional<uint32_t> compute_instance;  // absent: every compute instance of it
  friend bool operator==(const MigInstance&, const MigInstance&) = default;
  friend auto operator<=>(const MigInstance&, const MigInstance&) = default;
};

// One (rule, GPU) match. Node-level matches have gpu_index -1 and an empty gpu_uuid.
struct Evidence {
  std::string rule;
  api::Action action = api::Action::kNone;
  int gpu_index = -1;
  std::string gpu_uuid;
  // e.g. "GPU 3 (GPU-8f2c...): Xid 79 (fallen off the bus, RESTART_BM) x1 in 10m"
  std::string message;
  // True when the fault cannot be confined to this GPU (lost GPU, missing GPUs, NVLink or
  // NVSwitch fabric, reboot-class Xid, Xid not mapped to a GPU).
  bool node_wide = false;
  // The MIG instances the match is confined to: only Xids the driver attributed to a GPU
  // instance, none of them needing a GPU reset. Empty: the whole GPU.
  std::vector<MigInstance> mig_instances;
  friend bool operator==(const Evidence&, const Evidence&) = default;
};

// A rule whose condition holds but whose `for` has not elapsed yet.
struct PendingRule {
  std::string rule;
  api::Action action = api::Action::kNone;
  int gpu_index = -1;
  std::string gpu_uuid;
  std::string message;
  WallTime since{};     // first seen matching
  WallTime fires_at{};  // since + for
};

struct Verdict {
  std::string policy;  // name of the policy that produced it
  HealthState state = HealthState::kHealthy;
  // Unhealthy: the most severe fired rule's action. Unknown: spec.unknown.action.
  // Healthy: kNone.
  api::Action action = api::Action::kNone;
  UnknownCause unknown_cause = UnknownCause::kNone;
  // Condition reason (CamelCase): "GPUsHealthy", "RulesMatched", "NoReport", "StaleReport",
  // "InvalidReport", "TelemetryUnavailable".
  std::string reason;
  std::string message;  // one line for the condition/Event; stable while facts are stable

  // Fired matches. Rules with action None appear here too but do not make the node Unhealthy.
  std::vector<Evidence> evidence;
  std::vector<PendingRule> pending;
  std::vector<std::string> bad_gpus;  // UUIDs with fired evidence (action >= Event), sorted
  // The failure needs the whole node fenced (see Evidence::node_wide, or more bad GPUs than
  // remediation.maxBadGPUsForDeviceLevel). False: device-level (DRA) fencing may suffice.
  bool node_wide = false;

  // Healthy continuously for recovery.healthyFor (and recovery.automatic). A node never seen
  // unhealthy counts as recovered.
  bool recovered = false;
  std::optional<WallTime> healthy_since;  // absent: healthy as far as memory goes, or not healthy
  bool clock_skew = false;                // a report timestamp was in the future (treated as `now`)

  // When a verdict may change without a new report (a `for` elapsing, an Xid leaving its
  // window, the heartbeat budget running out, recovery hysteresis ending). Requeue then.
  std::optional<WallTime> next_evaluation;

  EvalMemory memory;            // persist this (per policy) in the remediation record
  bool memory_changed = false;  // memory != prior (write only then)

  std::vector<std::string> MatchedRules() const;  // distinct fired rule names (action >= Event)
};

// One Node condition (status.conditions[]) as nodeCondition rules see it.
struct NodeConditionFact {
  std::string type;
  std::string status;  // True | False | Unknown
  std::string reason;
  std::optional<WallTime> last_transition_time;
  friend bool operator==(const NodeConditionFact&, const NodeConditionFact&) = default;
};

// `report`: nullopt when the node has no report. `node_conditions`: the Node's conditions
// (nodeCondition rules; evaluated, like every rule, only with a readable, fresh report).
Verdict Evaluate(const api::GpuHealthPolicy& policy,
                 const std::optional<api::GpuNodeHealthStatus>& report, const EvalMemory& prior,
                 WallTime now, const std::vector<NodeConditionFact>& node_conditions = {});
// Same, from a decode result: NotFound -> no report; any other error -> garbage (Unknown,
// reason InvalidReport, the error in the message).
Verdict EvaluateReport(const api::GpuHealthPolicy& policy,
                       const StatusOr<api::GpuNodeHealthStatus>& report, const EvalMemory& prior,
                       WallTime now, const std::vector<NodeConditionFact>& node_conditions = {});

// Precedence when several policies select one node: the most severe action wins; on equal
// action Unhealthy > Unknown > Healthy; then the lexicographically smallest policy name.
// The result is the winner with next_evaluation = the earliest of all and recovered = every
// verdict recovered. nullopt for an empty list.
std::optional<Verdict> Resolve(const std::vector<Verdict>& verdicts);
// True when `a` takes precedence over `b` (the order Resolve uses).
bool Precedes(const Verdict& a, const Verdict& b);

}  // namespace gg::policy
