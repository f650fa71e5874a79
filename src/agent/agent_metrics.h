// The agent's metrics, declared in one table: dcgm-exporter-compatible per-GPU series
// (DCGM_FI_DEV_*, labels gpu, UUID, pci_bus_id, device, modelName, Hostname) so existing
// dashboards work, plus gpu_guardian_agent_* series (Xids by code, publish results and
// latency, source states). Values are refreshed from each built report.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/source.h"
#include "api/gpu_node_health.h"
#include "metrics/registry.h"

namespace gg::agent {

inline constexpr const char* kPublishResults[] = {"change", "heartbeat", "error"};

class AgentMetrics {
 public:
  AgentMetrics(metrics::Registry& registry, std::string hostname);

  // Creates the source's state series at zero (one per state).
  void RegisterSource(std::string_view source);
  // Per-GPU gauges/counters and source states from one report. `clock_masks` (may be
  // shorter than report.gpus) feeds DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
  void Observe(const api::GpuNodeHealthStatus& report,
               const std::vector<std::pair<std::string, uint64_t>>& clock_masks_by_uuid);
  void CountXid(int xid, int64_t count);
  void PublishResult(std::string_view result);  // one of kPublishResults
  void PublishLatency(double seconds);

  metrics::Registry& registry() { return registry_; }

 private:
  metrics::LabelValues GpuLabels(const api::GpuStatus& g) const;
  // Counters that mirror an absolute NVML counter: increase by the delta, and restart the
  // series when the source counter went backwards (volatile counters reset on driver reload).
  void SetCounter(metrics::CounterFamily& f, const metrics::LabelValues& labels, double v);

  metrics::Registry& registry_;
  std::string hostname_;
  metrics::GaugeFamily& temp_;
  metrics::GaugeFamily& slowdown_temp_;
  metrics::GaugeFamily& shutdown_temp_;
  metrics::GaugeFamily& power_;
  metrics::GaugeFamily& power_limit_;
  metrics::GaugeFamily& clock_reasons_;
  metrics::GaugeFamily& xid_last_;
  metrics::GaugeFamily& ecc_mode_;
  metrics::CounterFamily& ecc_sbe_vol_;
  metrics::CounterFamily& ecc_dbe_vol_;
  metrics::CounterFamily& ecc_sbe_agg_;
  metrics::CounterFamily& ecc_dbe_agg_;
  metrics::CounterFamily& remap_corr_;
  metrics::CounterFamily& remap_unc_;
  metrics::GaugeFamily& remap_failure_;
  metrics::GaugeFamily& remap_pending_;
  metrics::CounterFamily& retired_sbe_;
  metrics::CounterFamily& retired_dbe_;
  metrics::GaugeFamily& retired_pending_;
  metrics::CounterFamily& pcie_replay_;
  metrics::GaugeFamily& mig_mode_;
  metrics::GaugeFamily& gpu_lost_;
  metrics::GaugeFamily& nvlink_down_;
  metrics::CounterFamily& xid_total_;
  metrics::GaugeFamily& source_state_;
  metrics::CounterFamily& publishes_;
  metrics::HistogramFamily& publish_latency_;
  metrics::GaugeFamily& gpus_found_;
  metrics::GaugeFamily& gpus_expected_;
};

}  // namespace gg::agent
