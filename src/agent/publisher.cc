// Publisher implementation (see publisher.h).
#include "agent/publisher.h"

#include <algorithm>

#include "k8s/backoff.h"
#include "k8s/crd_hint.h"
#include "k8s/resource.h"

namespace gg::agent {

Publisher::Publisher(std::unique_ptr<ReportWriter> writer, Clock& clock, PublisherOptions options,
                     AgentMetrics* metrics, Logger log)
    : writer_(std::move(writer)),
      clock_(clock),
      options_(options),
      metrics_(metrics),
      log_(log.WithValues({{"publish", std::string(writer_->Mode())}})),
      waker_(clock) {}

Publisher::~Publisher() { Stop(); }

void Publisher::Start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

void Publisher::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    waker_.Notify();
    thread_.join();
  }
}

void Publisher::Offer(const api::GpuNodeHealthStatus& report) {
  {
    std::scoped_lock lock(mu_);
    const bool changed = !stats_.written || !api::SameFacts(*stats_.written, report);
    if (changed && !has_change_) {
      has_change_ = true;
      changed_at_ = clock_.Monotonic();
    }
    if (!changed) has_change_ = false;  // e.g. a flap that came back before we wrote it
    pending_ = report;
  }
  waker_.Notify();
}

Publisher::Stats Publisher::stats() const {
  std::scoped_lock lock(mu_);
  return stats_;
}

void Publisher::Loop(std::stop_token stop) {
  k8s::Backoff backoff(options_.initial_backoff, options_.max_backoff, 2.0, 0.2,
                       options_.jitter_seed);
  // Plain values with flags: GCC 12 warns (maybe-uninitialized) on optional<time_point>.
  bool wrote = false, retrying = false;
  MonoTime last_write{};  // last successful write (when wrote)
  MonoTime retry_at{};    // after a failure, not before this (when retrying)
  // Failure logging: the first failure of a run, a different error, or every
  // kRepeatLogInterval while it lasts; the recovery once. Not one line per retry.
  constexpr Duration kRepeatLogInterval = std::chrono::minutes(5);
  uint64_t failures_in_row = 0, failures_unlogged = 0;
  MonoTime failing_since{}, last_fail_log{};
  std::string last_logged_error;
  while (!stop.stop_requested()) {
    const MonoTime now = clock_.Monotonic();
    std::optional<api::GpuNodeHealthStatus> report;
    bool heartbeat = false;
    Duration wait = options_.heartbeat;
    bool have_changed_at = false;
    MonoTime changed_at{};
    {
      std::scoped_lock lock(mu_);
      if (pending_) {
        if (retrying && now < retry_at) {
          wait = retry_at - now;
        } else if (has_change_) {
          const MonoTime allowed = wrote ? last_write + options_.debounce : now;
          if (now >= allowed) {
            report = pending_;
            have_changed_at = true;
            changed_at = changed_at_;
          } else {
            wait = allowed - now;
          }
        } else if (wrote) {
          const MonoTime due = last_write + options_.heartbeat;
          if (now >= due) {
            report = pending_;
            heartbeat = true;
          } else {
            wait = due - now;
          }
        }
      }
    }
    if (!report) {
      waker_.Wait(wait, stop);
      continue;
    }
    report->heartbeat_time = clock_.Now();
    Status st = writer_->Write(*report);
    const MonoTime done = clock_.Monotonic();
    if (!st.ok()) {
      Duration delay = backoff.Next();
      if (st.retry_after_seconds() > 0)
        delay = std::max<Duration>(delay, std::chrono::seconds(st.retry_after_seconds()));
      retry_at = done + delay;
      retrying = true;
      {
        std::scoped_lock lock(mu_);
        ++stats_.errors;
        stats_.last_ok = false;
        stats_.last_error = st.ToString();
      }
      if (metrics_) metrics_->PublishResult("error");
      if (failures_in_row++ == 0) failing_since = done;
      const std::string err = st.ToString();
      if (failures_in_row == 1 || err != last_logged_error ||
          done - last_fail_log >= kRepeatLogInterval) {
        const long long retry_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(delay).count();
        const long long failing_s = static_cast<long long>(
            std::chrono::duration<double>(done - failing_since).count());
        if (k8s::IsResourceNotServed(st)) {
          log_.Error("cannot publish: " + k8s::MissingResourceHint(k8s::kGpuNodeHealths),
                     {{"error", err},
                      {"failed_attempts", static_cast<long long>(failures_in_row)},
                      {"failing_for_s", failing_s}});
        } else {
          log_.Warn(failures_in_row == 1 ? "report write failed; will retry"
                                         : "report write still failing; will retry",
                    {{"error", err},
                     {"failed_attempts", static_cast<long long>(failures_in_row)},
                     {"not_logged", static_cast<long long>(failures_unlogged)},
                     {"failing_for_s", failing_s},
                     {"retry_in_ms", retry_ms}});
        }
        last_logged_error = err;
        last_fail_log = done;
        failures_unlogged = 0;
      } else {
        ++failures_unlogged;
      }
      continue;
    }
    if (failures_in_row > 0) {
      log_.Info("report write recovered",
                {{"failed_attempts", static_cast<long long>(failures_in_row)},
                 {"failing_for_s", static_cast<long long>(
                                       std::chrono::duration<double>(done - failing_since)
                                           .count())}});
      failures_in_row = failures_unlogged = 0;
      last_logged_error.clear();
    } else if (!wrote) {
      log_.Info("first report written", {{"gpus", static_cast<long long>(report->gpus.size())},
                                         {"xids", static_cast<long long>(report->xids.size())}});
    }
    backoff.Reset();
    retrying = false;
    wrote = true;
    last_write = done;
    {
      std::scoped_lock lock(mu_);
      ++stats_.writes;
      if (heartbeat) ++stats_.heartbeats;
      stats_.last_ok = true;
      stats_.last_error.clear();
      stats_.written = *report;
      // Something newer may have been offered during the write: keep it pending only if its
      // facts differ from what was just written.
      if (pending_ && !api::SameFacts(*pending_, *report)) {
        if (!has_change_) {
          has_change_ = true;
          changed_at_ = done;
        }
      } else {
        has_change_ = false;
      }
    }
    if (metrics_) {
      metrics_->PublishResult(heartbeat ? "heartbeat" : "change");
      if (have_changed_at)
        metrics_->PublishLatency(std::chrono::duration<double>(done - changed_at).count());
    }
    log_.Debug(heartbeat ? "heartbeat written" : "report written",
               {{"gpus", static_cast<long long>(report->gpus.size())},
                {"xids", static_cast<long long>(report->xids.size())}});
  }
}

}  // namespace gg::agent
