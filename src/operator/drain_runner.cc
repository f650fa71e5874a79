// DrainRunner: one jthread per draining node; results parked until the reconciler takes them.
#include "operator/drain_runner.h"

#include <vector>

namespace gg::op {

DrainRunner::DrainRunner(remediation::Drainer& drainer,
                         std::function<void(const std::string&)> on_finished, int max_running,
                         Logger log)
    : drainer_(drainer),
      on_finished_(std::move(on_finished)),
      max_running_(max_running),
      log_(std::move(log)) {}

DrainRunner::~DrainRunner() { StopAll(); }

DrainRunner::Start DrainRunner::Ensure(const std::string& node, const remediation::DrainJob& spec,
                                       WallTime deadline) {
  std::scoped_lock lock(mu_);
  auto it = jobs_.find(node);
  if (it != jobs_.end()) return it->second->done ? Start::kFinished : Start::kRunning;
  int running = 0;
  for (const auto& [n, j] : jobs_) running += j->done ? 0 : 1;
  if (running >= max_running_) {
    log_.Info("drain waits: too many drains running", {{"node", node}, {"running", running}});
    return Start::kNoCapacity;
  }
  auto job = std::make_unique<Job>();
  Job* raw = job.get();
  jobs_[node] = std::move(job);
  raw->thread = std::jthread([this, raw, node, spec, deadline](std::stop_token stop) {
    remediation::DrainResult r = drainer_.Drain(node, spec, deadline, stop);
    if (r.state == remediation::DrainState::kCancelled) {
      log_.Info("drain cancelled", {{"node", node}, {"evicted", r.evicted}});
    }
    {
      std::scoped_lock l(mu_);
      raw->done = true;
      if (r.state != remediation::DrainState::kCancelled) raw->result = std::move(r);
    }
    if (!stop.stop_requested() && on_finished_) on_finished_(node);
  });
  return Start::kStarted;
}

std::optional<remediation::DrainResult> DrainRunner::Result(const std::string& node) const {
  std::scoped_lock lock(mu_);
  auto it = jobs_.find(node);
  if (it == jobs_.end() || !it->second->done) return std::nullopt;
  return it->second->result;
}

void DrainRunner::Forget(const std::string& node) {
  std::unique_ptr<Job> job;
  {
    std::scoped_lock lock(mu_);
    auto it = jobs_.find(node);
    if (it == jobs_.end() || !it->second->done) return;
    job = std::move(it->second);
    jobs_.erase(it);
  }
}

bool DrainRunner::Running(const std::string& node) const {
  std::scoped_lock lock(mu_);
  auto it = jobs_.find(node);
  return it != jobs_.end() && !it->second->done;
}

void DrainRunner::Cancel(const std::string& node) {
  std::unique_ptr<Job> job;
  {
    std::scoped_lock lock(mu_);
    auto it = jobs_.find(node);
    if (it == jobs_.end()) return;
    job = std::move(it->second);
    jobs_.erase(it);
  }
  job->thread.request_stop();
  // jthread joins on destruction, outside the lock (the job takes mu_ when it ends).
}

int DrainRunner::RunningCount() const {
  std::scoped_lock lock(mu_);
  int n = 0;
  for (const auto& [node, j] : jobs_) n += j->done ? 0 : 1;
  return n;
}

void DrainRunner::StopAll() {
  std::map<std::string, std::unique_ptr<Job>> jobs;
  {
    std::scoped_lock lock(mu_);
    jobs.swap(jobs_);
  }
  for (auto& [n, j] : jobs) j->thread.request_stop();
  jobs.clear();  // joins
}

}  // namespace gg::op
