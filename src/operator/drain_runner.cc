// DrainRunner: drains on reused worker threads; results parked until the reconciler takes them.
#include "operator/drain_runner.h"

#include <chrono>
#include <vector>

namespace gg::op {

namespace {
constexpr auto kIdle = std::chrono::seconds(5);  // a worker without a job this long ends
}  // namespace

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
  if (running_ >= max_running_ || stopping_ > 0) {
    log_.Info("drain waits: too many drains running", {{"node", node}, {"running", running_}});
    return Start::kNoCapacity;
  }
  auto job = std::make_unique<Job>();
  job->node = node;
  job->spec = spec;
  job->deadline = deadline;
  queue_.push_back(job.get());
  jobs_[node] = std::move(job);
  ++running_;
  ReapLocked();
  if (idle_ >= static_cast<int>(queue_.size())) {
    cv_.notify_all();
  } else {
    const std::uint64_t id = next_worker_++;
    workers_.emplace(id, std::jthread([this, id] { Work(id); }));
  }
  return Start::kStarted;
}

void DrainRunner::Work(std::uint64_t id) {
  std::unique_lock lock(mu_);
  while (true) {
    ++idle_;
    const bool got = cv_.wait_for(lock, kIdle, [this] { return stopping_ > 0 || !queue_.empty(); });
    --idle_;
    if (stopping_ > 0 || !got) break;
    Job* job = queue_.front();
    queue_.pop_front();
    job->started = true;
    lock.unlock();
    RunJob(*job);  // the job stays in jobs_ until done: Cancel and Forget wait or skip
    lock.lock();
  }
  ended_.push_back(id);
  cv_.notify_all();
}

void DrainRunner::RunJob(Job& job) {
  const std::string node = job.node;
  std::stop_token stop = job.stop.get_token();
  remediation::DrainResult r = drainer_.Drain(node, job.spec, job.deadline, stop);
  if (r.state == remediation::DrainState::kCancelled) {
    log_.Info("drain cancelled", {{"node", node}, {"evicted", r.evicted}});
  }
  {
    std::scoped_lock l(mu_);
    job.done = true;  // after this the job may be erased: only the copies below are used
    --running_;
    if (r.state != remediation::DrainState::kCancelled) job.result = std::move(r);
    cv_.notify_all();
  }
  if (!stop.stop_requested() && on_finished_) on_finished_(node);
}

void DrainRunner::ReapLocked() {
  for (std::uint64_t id : ended_) {
    auto it = workers_.find(id);
    if (it == workers_.end()) continue;
    workers_.erase(it);  // joins at once: it released mu_ on its way out of Work
  }
  ended_.clear();
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
  std::unique_lock lock(mu_);
  auto it = jobs_.find(node);
  if (it == jobs_.end()) return;
  job = std::move(it->second);
  jobs_.erase(it);
  job->stop.request_stop();
  if (!job->started) {  // still queued: no worker will see it
    std::erase(queue_, job.get());
    if (!job->done) --running_;
    return;
  }
  cv_.wait(lock, [&] { return job->done; });  // as a join: the drain has returned when Cancel does
}

int DrainRunner::RunningCount() const {
  std::scoped_lock lock(mu_);
  return running_;
}

void DrainRunner::StopAll() {
  std::map<std::uint64_t, std::jthread> workers;
  std::map<std::string, std::unique_ptr<Job>> jobs;
  {
    std::scoped_lock lock(mu_);
    ++stopping_;
    for (auto& [n, j] : jobs_) j->stop.request_stop();
    for (Job* j : queue_) {
      j->done = true;  // never started
      --running_;
    }
    queue_.clear();
    workers.swap(workers_);
    ended_.clear();
    cv_.notify_all();
  }
  workers.clear();  // joins the workers this call took
  std::unique_lock lock(mu_);
  // A StopAll running at the same time (leadership ending while the operator shuts down) may
  // hold workers whose drains have not returned yet: their jobs must outlive them.
  cv_.wait(lock, [this] { return running_ == 0; });
  jobs.swap(jobs_);
  ended_.clear();
  --stopping_;  // usable again once the last StopAll returns (Ensure starts fresh workers)
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
