// Report builders for tests and benchmark runners: what an agent writes for a node, so every
// fixture builds the same well-formed GPUNodeHealth status instead of carrying its own copy.
#pragma once

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

}  // namespace gg::api::testing
