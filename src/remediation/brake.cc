// Blast-radius budget arithmetic (see brake.h).
#include "remediation/brake.h"

#include <algorithm>

namespace gg::remediation {
namespace {

// Starts inside (now-1h, now]; sets *oldest to the earliest of them.
int64_t InLastHour(const std::vector<WallTime>& starts, WallTime now,
                   std::optional<WallTime>* oldest) {
  int64_t n = 0;
  for (WallTime t : starts) {
    if (t > now - std::chrono::hours(1) && t <= now) {
      ++n;
      if (!*oldest || t < **oldest) *oldest = t;
    }
  }
  return n;
}

void Add(std::string& reason, const std::string& more) {
  reason += (reason.empty() ? "" : "; ") + more;
}

void EarliestRetry(std::optional<WallTime>& retry, WallTime t) {
  if (!retry || t < *retry) retry = t;
}

}  // namespace

BrakeDecision BrakeAllowAll() { return BrakeDecision{}; }

BrakeDecision CheckBrake(const api::SafetySpec& safety, const BrakeInput& in, WallTime now) {
  BrakeDecision d;
  d.node_budget = safety.max_unhealthy.Resolve(in.matched_nodes);
  if (in.remediating_nodes + 1 > d.node_budget) {
    d.allow_new_node = false;
    Add(d.reason, "maxUnhealthy " + safety.max_unhealthy.ToString() + " of " +
                      std::to_string(in.matched_nodes) + " nodes allows " +
                      std::to_string(d.node_budget) + "; " + std::to_string(in.remediating_nodes) +
                      " under remediation");
  }
  if (safety.max_nodes_per_hour) {
    std::optional<WallTime> oldest;
    int64_t n = InLastHour(in.node_starts, now, &oldest);
    if (n >= *safety.max_nodes_per_hour) {
      d.allow_new_node = false;
      Add(d.reason, "maxNodesPerHour " + std::to_string(*safety.max_nodes_per_hour) + " reached (" +
                        std::to_string(n) + " in the last hour)");
      if (oldest) EarliestRetry(d.retry_at, *oldest + std::chrono::hours(1));
    }
  }
  if (safety.max_concurrent_drains && in.active_drains >= *safety.max_concurrent_drains) {
    d.allow_new_drain = false;
    Add(d.reason, "maxConcurrentDrains " + std::to_string(*safety.max_concurrent_drains) +
                      " reached (" + std::to_string(in.active_drains) + " running)");
  }
  if (safety.max_devices_per_hour) {
    std::optional<WallTime> oldest;
    int64_t n = InLastHour(in.device_starts, now, &oldest);
    d.devices_left = std::max<int64_t>(0, *safety.max_devices_per_hour - n);
    if (n >= *safety.max_devices_per_hour) {
      d.allow_new_device = false;
      Add(d.reason, "maxDevicesPerHour " + std::to_string(*safety.max_devices_per_hour) +
                        " reached (" + std::to_string(n) + " in the last hour)");
      if (oldest) EarliestRetry(d.retry_at, *oldest + std::chrono::hours(1));
    }
  }
  // The node cap also bounds device-level fences: a node with a fenced GPU is remediating.
  d.engaged = !d.allow_new_node || !d.allow_new_drain || !d.allow_new_device;
  return d;
}

void BrakeLedger::RecordNodeStart(WallTime at) {
  ++input_.remediating_nodes;
  input_.node_starts.push_back(at);
}

void BrakeLedger::RecordNodeEnd() {
  input_.remediating_nodes = std::max<int64_t>(0, input_.remediating_nodes - 1);
}

void BrakeLedger::RecordDrainEnd() {
  input_.active_drains = std::max<int64_t>(0, input_.active_drains - 1);
}

}  // namespace gg::remediation
