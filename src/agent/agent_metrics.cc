// AgentMetrics implementation (see agent_metrics.h). Names and units follow dcgm-exporter's
// default counters (docs/reference/nvml-abi.md, "Metric names borrowed from DCGM-exporter"): power
// in W, temperatures in °C.
#include "agent/agent_metrics.h"

#include <map>

namespace gg::agent {
namespace {

const std::vector<std::string> kGpuLabelNames = {"gpu",    "UUID",      "pci_bus_id",
                                                 "device", "modelName", "Hostname"};

}  // namespace

AgentMetrics::AgentMetrics(metrics::Registry& r, std::string hostname)
    : registry_(r),
      hostname_(std::move(hostname)),
      temp_(r.AddGauge("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", kGpuLabelNames)),
      slowdown_temp_(r.AddGauge("DCGM_FI_DEV_SLOWDOWN_TEMP",
                                "Slowdown temperature threshold (in C).", kGpuLabelNames)),
      shutdown_temp_(r.AddGauge("DCGM_FI_DEV_SHUTDOWN_TEMP",
                                "Shutdown temperature threshold (in C).", kGpuLabelNames)),
      power_(r.AddGauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", kGpuLabelNames)),
      power_limit_(r.AddGauge("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "Enforced power limit (in W).",
                              kGpuLabelNames)),
      clock_reasons_(r.AddGauge("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
                                "Current clock event (throttle) reasons, NVML bitmask.",
                                kGpuLabelNames)),
      xid_last_(r.AddGauge("DCGM_FI_DEV_XID_ERRORS",
                           "Value of the last XID error encountered (0 when none).",
                           kGpuLabelNames)),
      ecc_mode_(r.AddGauge("DCGM_FI_DEV_ECC_CURRENT", "ECC mode (1 = enabled).", kGpuLabelNames)),
      ecc_sbe_vol_(r.AddCounter("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                                "Total number of single-bit volatile ECC errors.", kGpuLabelNames)),
      ecc_dbe_vol_(r.AddCounter("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                                "Total number of double-bit volatile ECC errors.", kGpuLabelNames)),
      ecc_sbe_agg_(r.AddCounter("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
                                "Total number of single-bit persistent ECC errors.",
                                kGpuLabelNames)),
      ecc_dbe_agg_(r.AddCounter("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
                                "Total number of double-bit persistent ECC errors.",
                                kGpuLabelNames)),
      remap_corr_(r.AddCounter("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                               "Number of remapped rows for correctable errors.", kGpuLabelNames)),
      remap_unc_(r.AddCounter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
                              "Number of remapped rows for uncorrectable errors.", kGpuLabelNames)),
      remap_failure_(r.AddGauge("DCGM_FI_DEV_ROW_REMAP_FAILURE",
                                "Whether remapping of rows has failed.", kGpuLabelNames)),
      remap_pending_(r.AddGauge("DCGM_FI_DEV_ROW_REMAP_PENDING",
                                "Whether a row remap is pending (needs a GPU reset).",
                                kGpuLabelNames)),
      retired_sbe_(r.AddCounter("DCGM_FI_DEV_RETIRED_SBE",
                                "Total number of retired pages due to single-bit errors.",
                                kGpuLabelNames)),
      retired_dbe_(r.AddCounter("DCGM_FI_DEV_RETIRED_DBE",
                                "Total number of retired pages due to double-bit errors.",
                                kGpuLabelNames)),
      retired_pending_(r.AddGauge("DCGM_FI_DEV_RETIRED_PENDING",
                                  "Whether page retirement is pending.", kGpuLabelNames)),
      pcie_replay_(r.AddCounter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.",
                                kGpuLabelNames)),
      mig_mode_(r.AddGauge("DCGM_FI_DEV_MIG_MODE", "MIG mode (1 = enabled).", kGpuLabelNames)),
      gpu_lost_(r.AddGauge("gpu_guardian_agent_gpu_lost",
                           "1 when the GPU is lost (GPU_IS_LOST, off the bus, NVML hang).",
                           kGpuLabelNames)),
      nvlink_down_(r.AddGauge("gpu_guardian_agent_nvlink_links_down", "NVLink links reported down.",
                              kGpuLabelNames)),
      xid_total_(r.AddCounter("gpu_guardian_agent_xid_total",
                              "Xid (and SXid) occurrences seen by the agent, by code.", {"xid"})),
      source_state_(r.AddGauge("gpu_guardian_agent_source_state",
                               "1 for the current state of each telemetry source.",
                               {"source", "state"})),
      publishes_(r.AddCounter("gpu_guardian_agent_publishes_total",
                              "Report writes to the API server by result (change, heartbeat, "
                              "error).",
                              {"result"})),
      publish_latency_(r.AddHistogram(
          "gpu_guardian_agent_publish_latency_seconds",
          "Time from a change in the report to its successful write to the API server.", {},
          metrics::ExponentialBuckets(0.001, 2, 16))),
      gpus_found_(r.AddGauge("gpu_guardian_agent_gpus", "GPUs in the latest report.")),
      gpus_expected_(r.AddGauge("gpu_guardian_agent_expected_gpus",
                                "GPUs the node advertises (nvidia.com/gpu capacity; 0 = "
                                "unknown).")) {
  for (const char* result : kPublishResults) publishes_.WithLabels({result});
  publish_latency_.WithLabels(metrics::LabelValues{});
  gpus_found_.WithLabels(metrics::LabelValues{});
  gpus_expected_.WithLabels(metrics::LabelValues{});
}

void AgentMetrics::RegisterSource(std::string_view source) {
  for (auto s :
       {api::SourceState::kOk, api::SourceState::kDegraded, api::SourceState::kUnavailable})
    source_state_.WithLabels({source, api::SourceStateName(s)});
}

metrics::LabelValues AgentMetrics::GpuLabels(const api::GpuStatus& g) const {
  const std::string idx = std::to_string(g.index);
  return {idx, g.uuid, g.pci_bus_id, "nvidia" + idx, g.name, hostname_};
}

void AgentMetrics::SetCounter(metrics::CounterFamily& f, const metrics::LabelValues& labels,
                              double v) {
  auto& c = f.WithLabels(labels);
  const double cur = c.Value();
  if (v >= cur) {
    c.Inc(v - cur);
  } else {
    f.Remove(labels);
    f.WithLabels(labels).Inc(v);
  }
}

void AgentMetrics::Observe(const api::GpuNodeHealthStatus& report,
                           const std::vector<std::pair<std::string, uint64_t>>& clock_masks) {
  std::map<std::string, int> last_xid;  // uuid -> newest xid (xids are newest last)
  for (const auto& x : report.xids)
    if (!x.sxid && !x.gpu_uuid.empty()) last_xid[x.gpu_uuid] = x.xid;
  std::map<std::string, uint64_t> masks(clock_masks.begin(), clock_masks.end());

  for (const auto& g : report.gpus) {
    const auto labels = GpuLabels(g);
    if (g.temperature_c) temp_.WithLabels(labels).Set(*g.temperature_c);
    if (g.slowdown_temperature_c) slowdown_temp_.WithLabels(labels).Set(*g.slowdown_temperature_c);
    if (g.shutdown_temperature_c) shutdown_temp_.WithLabels(labels).Set(*g.shutdown_temperature_c);
    if (g.power_watts) power_.WithLabels(labels).Set(*g.power_watts);
    if (g.power_limit_watts) power_limit_.WithLabels(labels).Set(*g.power_limit_watts);
    if (auto it = masks.find(g.uuid); it != masks.end())
      clock_reasons_.WithLabels(labels).Set(static_cast<double>(it->second));
    auto xit = last_xid.find(g.uuid);
    xid_last_.WithLabels(labels).Set(xit == last_xid.end() ? 0 : xit->second);
    ecc_mode_.WithLabels(labels).Set(g.ecc_enabled ? 1 : 0);
    if (g.ecc_corrected_volatile) SetCounter(ecc_sbe_vol_, labels, *g.ecc_corrected_volatile);
    if (g.ecc_uncorrected_volatile) SetCounter(ecc_dbe_vol_, labels, *g.ecc_uncorrected_volatile);
    if (g.ecc_corrected_aggregate) SetCounter(ecc_sbe_agg_, labels, *g.ecc_corrected_aggregate);
    if (g.ecc_uncorrected_aggregate) SetCounter(ecc_dbe_agg_, labels, *g.ecc_uncorrected_aggregate);
    if (g.remapped_rows_correctable) SetCounter(remap_corr_, labels, *g.remapped_rows_correctable);
    if (g.remapped_rows_uncorrectable)
      SetCounter(remap_unc_, labels, *g.remapped_rows_uncorrectable);
    if (g.remapped_rows_correctable || g.remapped_rows_uncorrectable) {
      remap_failure_.WithLabels(labels).Set(g.remap_failure ? 1 : 0);
      remap_pending_.WithLabels(labels).Set(g.remap_pending ? 1 : 0);
    }
    if (g.retired_pages_sbe) SetCounter(retired_sbe_, labels, *g.retired_pages_sbe);
    if (g.retired_pages_dbe) SetCounter(retired_dbe_, labels, *g.retired_pages_dbe);
    if (g.retired_pages_sbe || g.retired_pages_dbe)
      retired_pending_.WithLabels(labels).Set(g.retired_pages_pending ? 1 : 0);
    if (g.pcie_replay_count) SetCounter(pcie_replay_, labels, *g.pcie_replay_count);
    mig_mode_.WithLabels(labels).Set(g.mig_enabled ? 1 : 0);
    gpu_lost_.WithLabels(labels).Set(g.lost ? 1 : 0);
    if (g.nvlink_links_down) nvlink_down_.WithLabels(labels).Set(*g.nvlink_links_down);
  }
  for (const auto& s : report.sources) {
    for (auto st :
         {api::SourceState::kOk, api::SourceState::kDegraded, api::SourceState::kUnavailable})
      source_state_.WithLabels({s.name, api::SourceStateName(st)}).Set(s.state == st ? 1 : 0);
  }
  gpus_found_.WithLabels(metrics::LabelValues{}).Set(static_cast<double>(report.gpus.size()));
  gpus_expected_.WithLabels(metrics::LabelValues{}).Set(report.expected_gpus);
}

void AgentMetrics::CountXid(int xid, int64_t count) {
  if (count > 0) xid_total_.WithLabels({std::to_string(xid)}).Inc(static_cast<double>(count));
}

void AgentMetrics::PublishResult(std::string_view result) { publishes_.WithLabels({result}).Inc(); }

void AgentMetrics::PublishLatency(double seconds) {
  publish_latency_.WithLabels(metrics::LabelValues{}).Observe(seconds);
}

}  // namespace gg::agent
