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
      waker_(clock),
      backoff_(options_.initial_backoff, options_.max_backoff, 2.0, 0.2, options_.jitter_seed) {}

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
  while (!stop.stop_requested()) {
    Due due = NextDue(clock_.Monotonic());
    if (!due.report) {
      waker_.Wait(due.wait, stop);
      continue;
    }
    due.report->heartbeat_time = clock_.Now();
    Status st = due.heartbeat ? writer_->Heartbeat(*due.report) : writer_->Write(*due.report);
    const MonoTime done = clock_.Monotonic();
    if (st.ok()) {
      OnWritten(due, done);
    } else {
      OnWriteFailed(st, done);
    }
  }
}

Publisher::Due Publisher::NextDue(MonoTime now) {
  Due d;
  d.wait = options_.heartbeat;
  std::scoped_lock lock(mu_);
  if (!pending_) return d;
  if (retrying_ && now < retry_at_) {
    d.wait = retry_at_ - now;
  } else if (has_change_) {
    const MonoTime allowed = wrote_ ? last_write_ + options_.debounce : now;
    if (now >= allowed) {
      d.report = pending_;
      d.have_changed_at = true;
      d.changed_at = changed_at_;
    } else {
      d.wait = allowed - now;
    }
  } else if (wrote_) {
    const MonoTime due = last_write_ + options_.heartbeat;
    if (now >= due) {
      d.report = pending_;
      d.heartbeat = true;
    } else {
      d.wait = due - now;
    }
  }
  return d;
}

void Publisher::OnWriteFailed(const Status& st, MonoTime done) {
  constexpr Duration kRepeatLogInterval = std::chrono::minutes(5);
  Duration delay = backoff_.Next();
  if (st.retry_after_seconds() > 0)
    delay = std::max<Duration>(delay, std::chrono::seconds(st.retry_after_seconds()));
  retry_at_ = done + delay;
  retrying_ = true;
  const std::string err = st.ToString();
  {
    std::scoped_lock lock(mu_);
    ++stats_.errors;
    stats_.last_ok = false;
    stats_.last_error = err;
  }
  if (metrics_) metrics_->PublishResult("error");
  if (failures_in_row_++ == 0) failing_since_ = done;
  if (failures_in_row_ != 1 && err == last_logged_error_ &&
      done - last_fail_log_ < kRepeatLogInterval) {
    ++failures_unlogged_;
    return;
  }
  const long long failing_s =
      static_cast<long long>(std::chrono::duration<double>(done - failing_since_).count());
  if (k8s::IsResourceNotServed(st)) {
    log_.Error("cannot publish: " + k8s::MissingResourceHint(k8s::kGpuNodeHealths),
               {{"error", err},
                {"failed_attempts", static_cast<long long>(failures_in_row_)},
                {"failing_for_s", failing_s}});
  } else {
    log_.Warn(failures_in_row_ == 1 ? "report write failed; will retry"
                                    : "report write still failing; will retry",
              {{"error", err},
               {"failed_attempts", static_cast<long long>(failures_in_row_)},
               {"not_logged", static_cast<long long>(failures_unlogged_)},
               {"failing_for_s", failing_s},
               {"retry_in_ms",
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(delay).count())}});
  }
  last_logged_error_ = err;
  last_fail_log_ = done;
  failures_unlogged_ = 0;
}

void Publisher::OnWritten(const Due& due, MonoTime done) {
  const api::GpuNodeHealthStatus& report = *due.report;
  if (failures_in_row_ > 0) {
    log_.Info(
        "report write recovered",
        {{"failed_attempts", static_cast<long long>(failures_in_row_)},
         {"failing_for_s",
          static_cast<long long>(std::chrono::duration<double>(done - failing_since_).count())}});
    failures_in_row_ = failures_unlogged_ = 0;
    last_logged_error_.clear();
  } else if (!wrote_) {
    log_.Info("first report written", {{"gpus", static_cast<long long>(report.gpus.size())},
                                       {"xids", static_cast<long long>(report.xids.size())}});
  }
  backoff_.Reset();
  retrying_ = false;
  wrote_ = true;
  last_write_ = done;
  {
    std::scoped_lock lock(mu_);
    ++stats_.writes;
    if (due.heartbeat) ++stats_.heartbeats;
    stats_.last_ok = true;
    stats_.last_error.clear();
    stats_.written = report;
    // Something newer may have been offered during the write: keep it pending only if its
    // facts differ from what was just written.
    if (pending_ && !api::SameFacts(*pending_, report)) {
      if (!has_change_) {
        has_change_ = true;
        changed_at_ = done;
      }
    } else {
      has_change_ = false;
    }
  }
  if (metrics_) {
    metrics_->PublishResult(due.heartbeat ? "heartbeat" : "change");
    if (due.have_changed_at)
      metrics_->PublishLatency(std::chrono::duration<double>(done - due.changed_at).count());
  }
  log_.Debug(due.heartbeat ? "heartbeat written" : "report written",
             {{"gpus", static_cast<long long>(report.gpus.size())},
              {"xids", static_cast<long long>(report.xids.size())}});
}

}  // namespace gg::agent
