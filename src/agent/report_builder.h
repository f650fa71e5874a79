// Report builder: merges the sources' snapshots and the Xid ring into one
// api::GpuNodeHealthStatus. Pure (no I/O, no clock): the caller passes `now`.
#pragma once

#include <string>
#include <vector>

#include "agent/source.h"
#include "api/gpu_node_health.h"
#include "common/clock.h"

namespace gg::agent {

struct ReportInputs {
  std::string node_name;
  std::string agent_version;
  int expected_gpus = 0;                  // node's nvidia.com/gpu capacity (0 = unknown)
  std::vector<SourceSnapshot> snapshots;  // in --source order (earlier wins per GPU)
  std::vector<api::XidEvent> xids;        // from the ring, newest last
};

// GPUs are merged by UUID (by index when a source has no UUID); the first source that
// reports a GPU provides all of its facts. GPUs are sorted by index. Every source appears in
// `sources`, in order. heartbeat_time is left unset: the publisher stamps it when writing.
api::GpuNodeHealthStatus BuildReport(const ReportInputs& in, WallTime now);

}  // namespace gg::agent
