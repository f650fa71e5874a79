// Agent: sources -> report -> publishers. Sources run their own threads and push Xids into
// the ring and "changed" notifications; one builder thread merges their snapshots into the
// report (on change, and at least every rebuild_interval), refreshes metrics and offers the
// report to each publisher's latest-value slot. Nothing here waits on the API server.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/agent_metrics.h"
#include "agent/publisher.h"
#include "agent/source.h"
#include "agent/waker.h"
#include "agent/xid_ring.h"
#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/log.h"

namespace gg::agent {

struct AgentOptions {
  std::string node_name;
  std::string agent_version;
  int expected_gpus = 0;
  std::size_t xid_ring_size = XidRing::kDefaultCapacity;
  Duration rebuild_interval = std::chrono::seconds(10);
  // Repeats of an Xid already logged are summed and logged as one line per this interval
  // (a storm of Xid 13 is one line a minute, not one per occurrence).
  Duration xid_summary_interval = std::chrono::seconds(60);
};

class Agent {
 public:
  // `metrics` may be null.
  Agent(AgentOptions options, Clock& clock, AgentMetrics* metrics, Logger log = Logger());
  ~Agent();  // Stop()
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Before Start().
  void AddSource(std::unique_ptr<Source> source);
  void AddPublisher(std::unique_ptr<Publisher> publisher);
  void SetExpectedGpus(int n);

  void Start(std::stop_token stop = {});
  void Stop();

  // --once: one synchronous collection from every source, then the report.
  api::GpuNodeHealthStatus CollectOnce();
  // The report from the sources' current snapshots (no collection, no publishing).
  api::GpuNodeHealthStatus BuildNow();
  // The last report the builder thread produced (nullopt before the first).
  std::optional<api::GpuNodeHealthStatus> Latest() const;
  uint64_t builds() const { return builds_.load(); }
  // Seconds since the builder thread last ran (for /healthz); 0 before Start.
  double SecondsSinceLastBuild() const;

  // Logs the Xids repeated since the last summary line now (one line), if any.
  void FlushXidSummary();

  // What sources get: on_xid feeds the ring (and metrics), on_change wakes the builder.
  SourceContext Context();
  XidRing& ring() { return ring_; }
  Source* FindSource(std::string_view name);
  const std::vector<std::unique_ptr<Publisher>>& publishers() const { return publishers_; }

 private:
  void Loop(std::stop_token stop);
  // The operator-facing log (one line per transition): the first sight of each Xid per GPU,
  // repeats summed per interval, source state changes, GPU fault facts appearing/clearing.
  void NoteXid(const api::XidEvent& x, const std::string& source, int64_t counted);
  void LogTransitions(const std::vector<SourceSnapshot>& snapshots,
                      const api::GpuNodeHealthStatus& report);
  void MaybeFlushXidSummary(bool force);

  AgentOptions options_;
  Clock& clock_;
  AgentMetrics* metrics_;
  Logger log_;
  XidRing ring_;
  Waker waker_;
  std::atomic<int> expected_gpus_;
  std::vector<std::unique_ptr<Source>> sources_;
  std::vector<std::unique_ptr<Publisher>> publishers_;
  mutable std::mutex mu_;
  std::optional<api::GpuNodeHealthStatus> latest_;
  std::atomic<uint64_t> builds_{0};
  std::atomic<int64_t> last_build_ns_{0};  // monotonic
  std::jthread thread_;
  std::unique_ptr<StopForward> forward_stop_;
  bool started_ = false;

  using XidKey = std::tuple<bool, int, std::string>;  // (sxid, xid, GPU UUID or PCI address)
  std::mutex log_mu_;
  std::set<XidKey> logged_xids_;
  std::map<XidKey, int64_t> repeated_xids_;  // since the last summary line
  MonoTime summary_since_{};
  std::map<std::string, api::SourceStatus> logged_sources_;
  // GPU UUID -> fault fact key -> detail, as last logged. "" key: node-level facts.
  std::map<std::string, std::map<std::string, std::string>> logged_faults_;
};

}  // namespace gg::agent
