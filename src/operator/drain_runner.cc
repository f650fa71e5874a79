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

PdbBudgets::PdbBudgets(k8s::RestClient& client, Clock& clock, runtime::InformerOptions options)
    : informer_(client, k8s::kPodDisruptionBudgets, clock, std::move(options)) {
  informer_.AddEventHandler(runtime::EventHandlers<k8s::PodDisruptionBudget>{
      [this](const k8s::PodDisruptionBudget& p) { OnChange(p); },
      [this](const k8s::PodDisruptionBudget&, const k8s::PodDisruptionBudget& p) { OnChange(p); },
      [this](const k8s::PodDisruptionBudget& p) { OnDelete(p); }});
}

PdbBudgets::~PdbBudgets() { informer_.Stop(); }

void PdbBudgets::OnChange(const k8s::PodDisruptionBudget& pdb) {
  bool allows = false;
  {
    std::scoped_lock lock(mu_);
    Budget& b = by_ns_[pdb.meta.namespace_][pdb.meta.name];
    const bool same_selector = b.version != 0 &&
                               b.selector.has_value() == pdb.selector.has_value() &&
                               (!b.selector || *b.selector == *pdb.selector);
    if (same_selector && b.allowed == pdb.disruptions_allowed) return;  // no news for a drain
    b.selector = pdb.selector;
    b.allowed = pdb.disruptions_allowed;
    b.version = ++version_;
    allows = b.allowed > 0;
  }
  if (!allows) return;
  std::scoped_lock lock(subs_mu_);
  for (const auto& [id, fn] : subs_) fn(pdb.meta.namespace_);
}

void PdbBudgets::OnDelete(const k8s::PodDisruptionBudget& pdb) {
  {
    std::scoped_lock lock(mu_);
    auto it = by_ns_.find(pdb.meta.namespace_);
    if (it == by_ns_.end()) return;
    it->second.erase(pdb.meta.name);
    if (it->second.empty()) by_ns_.erase(it);
  }
  // One budget fewer may leave a pod unguarded: let waiting drains look again.
  std::scoped_lock lock(subs_mu_);
  for (const auto& [id, fn] : subs_) fn(pdb.meta.namespace_);
}

std::optional<std::vector<remediation::BudgetState>> PdbBudgets::Covering(
    const k8s::Pod& pod) const {
  if (!informer_.HasSynced()) return std::nullopt;
  std::vector<remediation::BudgetState> out;
  std::scoped_lock lock(mu_);
  auto it = by_ns_.find(pod.meta.namespace_);
  if (it == by_ns_.end()) return out;
  for (const auto& [name, b] : it->second) {
    if (!b.selector || !b.selector->Matches(pod.meta.labels)) continue;
    out.push_back({pod.meta.namespace_.str() + "/" + name, b.allowed, b.version});
  }
  return out;
}

std::uint64_t PdbBudgets::Subscribe(std::function<void(std::string_view ns)> fn) {
  std::scoped_lock lock(subs_mu_);
  subs_[++next_sub_] = std::move(fn);
  return next_sub_;
}

void PdbBudgets::Unsubscribe(std::uint64_t id) {
  std::scoped_lock lock(subs_mu_);
  subs_.erase(id);
}

}  // namespace gg::op
