// Report builders for tests and benchmark runners: what an agent writes for a node, so every
// fixture builds the same well-formed GPUNodeHealth status instead of carrying its own copy.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "api/gpu_node_health.h"
#include "common/clock.h"

namespace gg::api::testing {

// The uuid scheme most unit fixtures use; DRA-facing fixtures pass sim::FakeGpuUuid instead
// (what a node's ResourceSlice publishes).
inline std::string PlainGpuUuid(const std::string& node, int i) {
  return "GPU-" + node + "-" + std::to_string(i);
}

// A healthy report: `gpus` GPUs at `temperature` °C with ECC on, the nvml source OK.
inline GpuNodeHealthStatus HealthyReport(
    const std::string& node, WallTime now, int gpus,
    const std::function<std::string(const std::string&, int)>& uuid = PlainGpuUuid,
    const std::string& agent_version = "test", int temperature = 40) {
  GpuNodeHealthStatus s;
  s.node_name = node;
  s.agent_version = agent_version;
  s.observed_at = s.heartbeat_time = now;
  s.expected_gpus = gpus;
  for (int i = 0; i < gpus; ++i) {
    GpuStatus g;
    g.index = i;
    g.uuid = uuid(node, i);
    g.temperature_c = temperature;
    g.ecc_enabled = true;
    s.gpus.push_back(g);
  }
  s.sources.push_back({"nvml", SourceState::kOk, ""});
  return s;
}

// Adds one Xid on GPU `gpu`, seen once at the report's observedAt. Defaults: Xid 79.
inline void AddXid(GpuNodeHealthStatus& s, int xid = 79, int gpu = 0,
                   const std::string& category = "Bus",
                   const std::string& recommended_action = "RESTART_BM",
                   const std::string& message = "GPU has fallen off the bus") {
  XidEvent e;
  e.xid = xid;
  e.gpu_uuid = s.gpus[static_cast<std::size_t>(gpu)].uuid;
  e.count = 1;
  e.first_seen = e.last_seen = s.observed_at;
  e.category = category;
  e.recommended_action = recommended_action;
  e.message = message;
  s.xids.push_back(e);
}

inline WallTime EveryFieldAt(int64_t s, int64_t us = 0) {
  return WallTime(std::chrono::seconds(s) + std::chrono::microseconds(us));
}

// Every field of the report set (two GPUs — one lost with MIG devices —, three Xids, three
// sources): for codec and cache round trips.
inline GpuNodeHealthStatus EveryFieldReport() {
  GpuNodeHealthStatus s;
  s.node_name = "gpu-node-1";
  s.agent_version = "0.1.0";
  s.observed_at = EveryFieldAt(1'790'000'000, 123456);
  s.heartbeat_time = EveryFieldAt(1'790'000'001);
  s.expected_gpus = 8;
  GpuStatus g;
  g.index = 0;
  g.uuid = "GPU-aaaa";
  g.name = "NVIDIA H200";
  g.serial = "1650924060000";
  g.pci_bus_id = "00000000:18:00.0";
  g.temperature_c = 41;
  g.slowdown_temperature_c = 87;
  g.shutdown_temperature_c = 92;
  g.throttle_reasons = {"GpuIdle", "HwThermalSlowdown"};
  g.power_watts = 76.5;
  g.power_limit_watts = 700;
  g.ecc_enabled = true;
  g.ecc_corrected_volatile = 0;
  g.ecc_uncorrected_volatile = 2;
  g.ecc_corrected_aggregate = 10;
  g.ecc_uncorrected_aggregate = 18'000'000'000'000ULL;
  g.remapped_rows_correctable = 1;
  g.remapped_rows_uncorrectable = 0;
  g.remap_pending = true;
  g.pcie_replay_count = 3;
  g.nvlink_links_total = 18;
  g.nvlink_links_down = 1;
  g.nvlink_error_count = 7;
  g.recovery_action = "None";
  s.gpus.push_back(g);
  GpuStatus lost;
  lost.index = 1;
  lost.uuid = "GPU-bbbb";
  lost.lost = true;
  lost.mig_enabled = true;
  lost.mig_pending_enabled = false;
  lost.mig_devices.push_back(MigDevice{0, "MIG-aaaa-0300", 3, 0, "3g.71gb", 69632});
  lost.mig_devices.push_back(MigDevice{1, "MIG-aaaa-0500", 5, 0, "", std::nullopt});
  lost.retired_pages_sbe = 2;
  lost.retired_pages_dbe = 1;
  lost.retired_pages_pending = true;
  s.gpus.push_back(lost);
  XidEvent x;
  x.xid = 79;
  x.gpu_uuid = "GPU-bbbb";
  x.pci_bus_id = "0000:3b:00.0";
  x.count = 3;
  x.first_seen = EveryFieldAt(1'789'999'000);
  x.last_seen = EveryFieldAt(1'789'999'900, 5);
  x.category = "Bus";
  x.recommended_action = "RESTART_BM";
  x.message = "GPU has fallen off the bus.";
  s.xids.push_back(x);
  XidEvent mx;
  mx.xid = 13;
  mx.gpu_uuid = "GPU-bbbb";
  mx.count = 1;
  mx.gpu_instance = 3;
  mx.compute_instance = 0;
  s.xids.push_back(mx);
  XidEvent sx;
  sx.xid = 12028;
  sx.sxid = true;
  sx.count = 1;
  s.xids.push_back(sx);
  s.sources.push_back({"nvml", SourceState::kOk, ""});
  s.sources.push_back({"kmsg", SourceState::kDegraded, "overrun: 12 records lost"});
  s.sources.push_back({"file", SourceState::kUnavailable, "no such file"});
  return s;
}

}  // namespace gg::api::testing
