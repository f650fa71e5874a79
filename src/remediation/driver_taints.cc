// The DRA driver's own device taints as evidence (see driver_taints.h).
#include "remediation/driver_taints.h"

#include <algorithm>

#include "common/time_util.h"

namespace gg::remediation {
namespace {

std::string EvidenceMessage(const DriverTaint& t, const std::string& what) {
  std::string m = what + ": tainted " + t.ToString() + " by the DRA driver " + t.device.driver +
                  " (device " + t.device.device;
  if (t.time_added) m += ", since " + FormatRfc3339(*t.time_added);
  return m + ")";
}

// The evidence for one taint's device: the GPU it is, or the GPU a MIG device of it is on.
policy::Evidence EvidenceFor(const DriverTaint& t, const api::GpuNodeHealthStatus* report) {
  policy::Evidence e;
  e.rule = kDriverTaintRule;
  e.action = api::Action::kDrain;
  e.gpu_uuid = t.uuid;
  std::string what = "device " + t.uuid;
  for (const auto& g : report ? report->gpus : std::vector<api::GpuStatus>{}) {
    if (g.uuid == t.uuid) {
      e.gpu_index = g.index;
      what = "GPU " + std::to_string(g.index) + " (" + g.uuid + ")";
    }
    for (const auto& m : g.mig_devices) {
      if (m.uuid != t.uuid) continue;
      e.gpu_index = g.index;
      e.gpu_uuid = g.uuid;
      e.mig_instances = {policy::MigInstance{m.gpu_instance, m.compute_instance}};
      what = "MIG device " + m.uuid + " of GPU " + std::to_string(g.index) + " (" + g.uuid + ")";
    }
  }
  e.message = EvidenceMessage(t, what);
  return e;
}

}  // namespace

std::vector<policy::Evidence> DriverTaintEvidence(const std::vector<DriverTaint>& taints,
                                                  const api::GpuNodeHealthStatus* report) {
  std::vector<policy::Evidence> out;
  for (const auto& t : taints) {
    if (t.uuid.empty() || DeviceEffectRank(t.effect) < 1) continue;
    out.push_back(EvidenceFor(t, report));
  }
  return out;
}

void FoldDriverTaints(Assessment& a, std::vector<DriverTaint> taints,
                      const api::GpuNodeHealthStatus* report, WallTime now) {
  if (!a.verdict || !a.policy || a.excluded || a.ungoverned) return;
  std::vector<policy::Evidence> found = DriverTaintEvidence(taints, report);
  a.driver_taints = std::move(taints);
  if (found.empty()) return;
  policy::Verdict& v = *a.verdict;
  const bool was_unhealthy = v.state == policy::HealthState::kUnhealthy;
  std::vector<std::string> lines;
  for (auto& e : found) {
    if (std::find(v.bad_gpus.begin(), v.bad_gpus.end(), e.gpu_uuid) == v.bad_gpus.end()) {
      v.bad_gpus.push_back(e.gpu_uuid);
    }
    lines.push_back(e.message);
    v.evidence.push_back(std::move(e));
  }
  std::sort(v.bad_gpus.begin(), v.bad_gpus.end());
  std::string joined;
  for (const auto& l : lines) joined += (joined.empty() ? "" : "; ") + l;
  v.message = was_unhealthy && !v.message.empty() ? v.message + "; " + joined : joined;
  v.state = policy::HealthState::kUnhealthy;
  v.reason = "RulesMatched";
  v.action = std::max(v.action, api::Action::kDrain);
  v.unknown_cause = policy::UnknownCause::kNone;
  v.recovered = false;
  v.healthy_since.reset();
  const int max_bad = a.policy->spec.remediation.max_bad_gpus_for_device_level;
  v.node_wide = v.node_wide || static_cast<int>(v.bad_gpus.size()) > max_bad;
  // Recovery counts healthyFor from the first pass without the driver's taint. The state
  // keeps the time it began (the recorded one when the report alone says Healthy), so passes
  // while the taint stays write nothing new.
  policy::EvalMemory& m = a.memories[v.policy];
  if (m.state != policy::HealthState::kUnhealthy) {
    std::optional<WallTime> since;
    if (a.record) {
      auto it = a.record->memory.find(v.policy);
      if (it != a.record->memory.end() && it->second.state == policy::HealthState::kUnhealthy) {
        since = it->second.since;
      }
    }
    m.state = policy::HealthState::kUnhealthy;
    m.since = since.value_or(now);
  }
  v.memory = m;
  a.states[v.policy] = policy::HealthState::kUnhealthy;
  a.fence_units = report ? FenceUnitsFor(v, *report) : std::vector<FenceUnit>{};
}

}  // namespace gg::remediation
