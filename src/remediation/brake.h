// Brake: the blast-radius budget of one GPUHealthPolicy (safety: maxUnhealthy as a cap on
// nodes under remediation at once, maxNodesPerHour, maxConcurrentDrains, maxDevicesPerHour).
// Pure: counts and timestamps in, a decision out. It only ever holds back NEW remediation;
// continuing an occurrence and recovery are never blocked, and it releases itself as soon as
// the counts are back under budget (no manual reset, unlike NVSentinel's breaker).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"

namespace gg::remediation {

struct BrakeInput {
  int64_t matched_nodes = 0;          // nodes the policy selects (the base of maxUnhealthy %)
  int64_t remediating_nodes = 0;      // nodes with an active fence of ours (taint/cordon/drain/DRA)
  std::vector<WallTime> node_starts;  // when fences started; older than 1h are ignored
  int64_t active_drains = 0;          // drains running now
  std::vector<WallTime> device_starts;  // device-level (DRA) fences started; 1h window
};

struct BrakeDecision {
  bool allow_new_node = true;    // may start fencing one more node
  bool allow_new_drain = true;   // may start one more drain
  bool allow_new_device = true;  // may fence one more GPU (DRA)
  // Device-level fences still allowed this hour (maxDevicesPerHour - starts); nullopt: no cap.
  // One plan may fence several GPUs, so it needs the count, not just allow_new_device.
  std::optional<int64_t> devices_left;
  bool engaged = false;              // some budget is exhausted (any allow_* is false)
  std::string reason;                // every exhausted budget, "; "-joined
  int64_t node_budget = 0;           // maxUnhealthy resolved against matched_nodes
  std::optional<WallTime> retry_at;  // when an hourly budget frees a slot
};

// A permissive decision (no policy safety applies), e.g. for tests or recovery-only plans.
BrakeDecision BrakeAllowAll();

// maxUnhealthy: remediating_nodes + 1 <= Resolve(matched_nodes) (percent rounds up, so
// 10% of 25 nodes = 3; "0"/"0%" allows none). Per hour: starts in (now-1h, now] < max.
BrakeDecision CheckBrake(const api::SafetySpec& safety, const BrakeInput& input, WallTime now);

// The same budget as a running ledger for one reconcile pass over many nodes: Check, then
// Record* what was actually started, so 30 failing nodes under a 10% budget of 100 get
// exactly 10 starts.
class BrakeLedger {
 public:
  BrakeLedger(api::SafetySpec safety, BrakeInput input)
      : safety_(std::move(safety)), input_(std::move(input)) {}
  BrakeDecision Check(WallTime now) const { return CheckBrake(safety_, input_, now); }
  void RecordNodeStart(WallTime at);
  void RecordNodeEnd();  // a node recovered / released
  void RecordDrainStart() { ++input_.active_drains; }
  void RecordDrainEnd();
  void RecordDeviceStart(WallTime at) { input_.device_starts.push_back(at); }
  const BrakeInput& input() const { return input_; }

 private:
  api::SafetySpec safety_;
  BrakeInput input_;
};

}  // namespace gg::remediation
