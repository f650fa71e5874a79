// Agent: sources -> report -> publishers. Sources run their own threads and push Xids into
// the ring and "changed" notifications; one builder thread merges their snapshots into the
// report (on change, and at least every rebuild_interval), refreshes metrics and offers the
// report to each publisher's latest-value slot. Nothing here waits on the API server.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
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

  // What sources get: on_xid feeds the ring (and metrics), on_change wakes the builder.
  SourceContext Context();
  XidRing& ring() { return ring_; }
  Source* FindSource(std::string_view name);
  const std::vector<std::unique_ptr<Publisher>>& publishers() const { return publishers_; }

 private:
  void Loop(std::stop_token stop);

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
};

}  // namespace gg::agent
