// GPUNodeHealth helpers: source state names and fact equality used by the agent to write
// only on change. What "the same facts" means is documented in docs/api.md.
#include "api/gpu_node_health.h"

#include <algorithm>
#include <cstdlib>

namespace gg::api {

std::string AgentLeaseName(std::string_view node) {
  return std::string(kAgentLeasePrefix) + std::string(node);
}

std::string_view AgentLeaseNode(std::string_view lease_name) {
  const std::string_view prefix = kAgentLeasePrefix;
  if (lease_name.size() <= prefix.size() || !lease_name.starts_with(prefix)) return {};
  return lease_name.substr(prefix.size());
}

namespace {

// Telemetry that moves on every sweep without saying anything about health. Comparing it
// exactly would turn every 10 s sweep into an API write on every node.
constexpr int kTemperatureDeadbandC = 3;
constexpr int kHotMarginC = 5;    // below slowdown - margin the deadband applies
constexpr int kDefaultHotC = 80;  // when the slowdown threshold is unknown

bool IsBenignThrottleReason(const std::string& r) {
  return r == "GpuIdle" || r == "ApplicationsClocksSetting" || r == "SwPowerCap" ||
         r == "SyncBoost" || r == "DisplayClockSetting";
}

std::vector<std::string> HealthThrottleReasons(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& r : in)
    if (!IsBenignThrottleReason(r)) out.push_back(r);
  std::sort(out.begin(), out.end());
  return out;
}

bool SameTemperature(const GpuStatus& a, const GpuStatus& b) {
  if (a.temperature_c == b.temperature_c) return true;
  if (!a.temperature_c || !b.temperature_c) return false;
  const int hot =
      (a.slowdown_temperature_c ? *a.slowdown_temperature_c - kHotMarginC : kDefaultHotC);
  if (*a.temperature_c >= hot || *b.temperature_c >= hot) return false;
  return std::abs(*a.temperature_c - *b.temperature_c) < kTemperatureDeadbandC;
}

template <typename T, typename Eq>
bool SameList(const std::vector<T>& a, const std::vector<T>& b, Eq eq) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), eq);
}

bool SameMig(const MigDevice& a, const MigDevice& b) {
  return a.index == b.index && a.uuid == b.uuid && a.gpu_instance == b.gpu_instance &&
         a.compute_instance == b.compute_instance && a.profile == b.profile &&
         a.memory_mib == b.memory_mib;
}

bool SameGpu(const GpuStatus& a, const GpuStatus& b) {
  // power_watts is deliberately not compared (it is in /metrics; the limit is compared).
  return a.index == b.index && a.uuid == b.uuid && a.name == b.name && a.serial == b.serial &&
         a.pci_bus_id == b.pci_bus_id && a.lost == b.lost && a.mig_enabled == b.mig_enabled &&
         a.mig_pending_enabled == b.mig_pending_enabled &&
         SameList(a.mig_devices, b.mig_devices, SameMig) && SameTemperature(a, b) &&
         a.slowdown_temperature_c == b.slowdown_temperature_c &&
         a.shutdown_temperature_c == b.shutdown_temperature_c &&
         HealthThrottleReasons(a.throttle_reasons) == HealthThrottleReasons(b.throttle_reasons) &&
         a.power_limit_watts == b.power_limit_watts && a.ecc_enabled == b.ecc_enabled &&
         a.ecc_corrected_volatile == b.ecc_corrected_volatile &&
         a.ecc_uncorrected_volatile == b.ecc_uncorrected_volatile &&
         a.ecc_corrected_aggregate == b.ecc_corrected_aggregate &&
         a.ecc_uncorrected_aggregate == b.ecc_uncorrected_aggregate &&
         a.remapped_rows_correctable == b.remapped_rows_correctable &&
         a.remapped_rows_uncorrectable == b.remapped_rows_uncorrectable &&
         a.remap_pending == b.remap_pending && a.remap_failure == b.remap_failure &&
         a.retired_pages_sbe == b.retired_pages_sbe && a.retired_pages_dbe == b.retired_pages_dbe &&
         a.retired_pages_pending == b.retired_pages_pending &&
         a.pcie_replay_count == b.pcie_replay_count &&
         a.nvlink_links_total == b.nvlink_links_total &&
         a.nvlink_links_down == b.nvlink_links_down &&
         a.nvlink_error_count == b.nvlink_error_count && a.recovery_action == b.recovery_action;
}

bool SameXid(const XidEvent& a, const XidEvent& b) {
  return a.xid == b.xid && a.sxid == b.sxid && a.gpu_uuid == b.gpu_uuid &&
         a.pci_bus_id == b.pci_bus_id && a.count == b.count && a.first_seen == b.first_seen &&
         a.last_seen == b.last_seen && a.category == b.category &&
         a.recommended_action == b.recommended_action && a.message == b.message &&
         a.gpu_instance == b.gpu_instance && a.compute_instance == b.compute_instance;
}

bool SameSource(const SourceStatus& a, const SourceStatus& b) {
  return a.name == b.name && a.state == b.state && a.message == b.message;
}

}  // namespace

std::string_view SourceStateName(SourceState s) {
  switch (s) {
    case SourceState::kOk:
      return "OK";
    case SourceState::kDegraded:
      return "Degraded";
    case SourceState::kUnavailable:
      return "Unavailable";
  }
  return "Unavailable";
}

bool SameFacts(const GpuNodeHealthStatus& a, const GpuNodeHealthStatus& b) {
  return a.node_name == b.node_name && a.agent_version == b.agent_version &&
         a.expected_gpus == b.expected_gpus && SameList(a.gpus, b.gpus, SameGpu) &&
         SameList(a.xids, b.xids, SameXid) && SameList(a.sources, b.sources, SameSource);
}

}  // namespace gg::api
