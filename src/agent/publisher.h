// Publisher: writes the latest report through a ReportWriter on its own thread, so
// collectors never block on the API server. Offer() drops the report into a latest-value
// slot. A report whose facts changed (api::SameFacts) is written at once if the last write
// was at least `debounce` ago, else at the end of that window (bursts coalesce into one
// write); an unchanged report is only renewed as a heartbeat every `heartbeat` (the writer
// sends just the new heartbeatTime where it can, so an unchanged fleet costs the API server
// and its watchers a few bytes, not the report). Failed writes are retried with jittered
// exponential backoff, always with the newest report.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "agent/agent_metrics.h"
#include "agent/waker.h"
#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "k8s/backoff.h"

namespace gg::agent {

// Where a report goes ("resource": the GPUNodeHealth object; "annotation": the Node).
class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual std::string_view Mode() const = 0;
  // Writes the report (heartbeat_time already stamped). Transient errors are retried by the
  // publisher; the writer only has to leave itself ready for another attempt.
  virtual Status Write(const api::GpuNodeHealthStatus& report) = 0;
  // Renews the freshness of the facts last written (`report` has the same facts and a new
  // heartbeat_time). By default the whole report again.
  virtual Status Heartbeat(const api::GpuNodeHealthStatus& report) { return Write(report); }
};

struct PublisherOptions {
  Duration debounce = std::chrono::milliseconds(200);
  Duration heartbeat = std::chrono::minutes(5);
  Duration initial_backoff = std::chrono::milliseconds(500);
  Duration max_backoff = std::chrono::seconds(30);
  uint64_t jitter_seed = 0;  // 0: random
};

class Publisher {
 public:
  // `metrics` may be null.
  Publisher(std::unique_ptr<ReportWriter> writer, Clock& clock, PublisherOptions options,
            AgentMetrics* metrics, Logger log = Logger());
  ~Publisher();  // Stop()
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  void Start();
  void Stop();
  // Never blocks on I/O.
  void Offer(const api::GpuNodeHealthStatus& report);

  struct Stats {
    uint64_t writes = 0;      // successful writes (changes + heartbeats)
    uint64_t heartbeats = 0;  // successful writes of unchanged facts
    uint64_t errors = 0;      // failed attempts
    bool last_ok = true;      // the last attempt succeeded (or none yet)
    std::string last_error;
    std::optional<api::GpuNodeHealthStatus> written;  // last successfully written report
  };
  Stats stats() const;
  std::string_view mode() const { return writer_->Mode(); }

 private:
  // What the loop is to write now (nothing: how long to wait).
  struct Due {
    std::optional<api::GpuNodeHealthStatus> report;
    bool heartbeat = false;
    bool have_changed_at = false;
    MonoTime changed_at{};
    Duration wait{};
  };
  void Loop(std::stop_token stop);
  Due NextDue(MonoTime now);
  void OnWriteFailed(const Status& st, MonoTime done);
  void OnWritten(const Due& due, MonoTime done);

  std::unique_ptr<ReportWriter> writer_;
  Clock& clock_;
  PublisherOptions options_;
  AgentMetrics* metrics_;
  Logger log_;
  Waker waker_;

  mutable std::mutex mu_;
  std::optional<api::GpuNodeHealthStatus> pending_;  // latest offered
  bool has_change_ = false;  // an offered report's facts differ from the written ones
  MonoTime changed_at_{};    // when that unwritten change appeared
  Stats stats_;

  // The loop thread's own state. Failure logging: the first failure of a run, a different
  // error, or every kRepeatLogInterval while it lasts; the recovery once.
  k8s::Backoff backoff_;
  bool wrote_ = false, retrying_ = false;
  MonoTime last_write_{};  // last successful write (when wrote_)
  MonoTime retry_at_{};    // after a failure, not before this (when retrying_)
  uint64_t failures_in_row_ = 0, failures_unlogged_ = 0;
  MonoTime failing_since_{}, last_fail_log_{};
  std::string last_logged_error_;
  std::jthread thread_;
};

}  // namespace gg::agent
