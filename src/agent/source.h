// Source: one telemetry input of the agent ("nvml", "kmsg", "file", "script"). A source runs
// its own thread(s) after Start(); Snapshot() returns its latest partial facts without
// blocking on hardware; Xids are pushed as they happen through SourceContext::on_xid so they
// reach the report (and the API) without waiting for the next sweep.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "api/gpu_node_health.h"
#include "common/status.h"

namespace gg::agent {

// Forwards an outside stop request to a source's own thread(s).
using StopForward = std::stop_callback<std::function<void()>>;

// What a source contributes to the report.
struct SourceSnapshot {
  bool provides_gpus = false;        // false: `gpus` is not this source's business (kmsg)
  std::vector<api::GpuStatus> gpus;  // per-GPU facts (may be empty when none are visible)
  api::SourceStatus status;          // name, state, message
  // Extra per-GPU facts for metrics only (clock-event bitmask), same order as gpus.
  std::vector<uint64_t> clock_event_masks;
  std::string driver_version;
};

// Callbacks a source uses to talk to the agent. All are thread-safe and non-blocking.
struct SourceContext {
  // An Xid (already classified), with the source's name for de-duplication.
  std::function<void(const api::XidEvent&, const std::string& source)> on_xid;
  // "My snapshot changed": the agent rebuilds the report soon.
  std::function<void()> on_change;
};

class Source {
 public:
  virtual ~Source() = default;
  virtual std::string_view Name() const = 0;
  // Starts background work. Errors that make the source useless are reflected in the
  // snapshot's status (Unavailable), not returned: the agent keeps running with the rest.
  virtual void Start(const SourceContext& ctx, std::stop_token stop) = 0;
  // Stops threads; idempotent; called before destruction.
  virtual void Stop() = 0;
  // One synchronous collection now (used by --once and by tests); then Snapshot() is fresh.
  virtual void PollOnce(const SourceContext& ctx) = 0;
  virtual SourceSnapshot Snapshot() const = 0;
};

}  // namespace gg::agent
