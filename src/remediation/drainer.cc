// Drainer: one round = LIST the node's pods, settle what is gone, evict what is due (bounded
// concurrency), then sleep; repeated until done, the deadline, or stop.
#include "remediation/drainer.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "k8s/codec.h"
#include "k8s/errors.h"

namespace gg::remediation {

std::string_view DrainStateName(DrainState s) {
  switch (s) {
    case DrainState::kDone:
      return "Done";
    case DrainState::kBlocked:
      return "Blocked";
    case DrainState::kCancelled:
      return "Cancelled";
  }
  return "Unknown";
}

StatusOr<std::vector<k8s::Pod>> RestPodApi::ListPodsOnNode(std::string_view node) {
  std::vector<k8s::Pod> pods;
  k8s::ListOptions lo;
  lo.field_selector = "spec.nodeName=" + std::string(node);
  lo.limit = 500;
  Status s = client_.ListPages(
      k8s::kPods, "", lo, [&pods](std::string& body) -> StatusOr<k8s::ListPageInfo> {
        auto list = k8s::ParseListInto<k8s::Pod>(
            body, [&pods](k8s::Pod&& p) { pods.push_back(std::move(p)); });
        if (!list.ok()) return list.status();
        return k8s::ListPageInfo{list->resource_version, list->continue_token};
      });
  if (!s.ok()) return s.WithContext("listing pods on node " + std::string(node));
  return pods;
}

Status RestPodApi::Evict(const k8s::Pod& pod, const k8s::DeleteOptions& options) {
  return client_.Evict(pod.meta.namespace_, pod.meta.name, options);
}

Drainer::Drainer(PodApi& api, Clock& clock, DrainerOptions options)
    : api_(api), clock_(clock), opts_(std::move(options)) {
  opts_.max_concurrent_evictions = std::max(1, opts_.max_concurrent_evictions);
}

std::size_t Drainer::StageOf(const k8s::Pod& pod, const std::vector<DrainStage>& order) {
  const std::int32_t prio = pod.priority.value_or(0);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const DrainStage& st = order[i];
    if (st.priority_below && !(prio < *st.priority_below)) continue;
    if (st.pod_selector && !st.pod_selector->Matches(pod.meta.labels)) continue;
    return i;
  }
  return order.size();
}

std::string_view Drainer::SkipReason(const k8s::Pod& pod, const DrainJob& spec) {
  if (pod.IsFinished()) return "finished";
  if (pod.ControllerKind() == "DaemonSet") return "daemonset";
  if (pod.IsMirror()) return "mirror";
  if (spec.scope == DrainScope::kGpuPods && pod.gpu_requests <= 0 && pod.resource_claims.empty()) {
    return "out-of-scope";
  }
  if (spec.pod_uids && !spec.pod_uids->contains(pod.meta.uid)) return "out-of-scope";
  return "";
}

std::string Drainer::Unevictable(const k8s::Pod& pod, const DrainJob& spec) {
  if (pod.meta.deletion_timestamp) return "";  // already going: just wait for it
  if (!spec.force && pod.meta.Controller() == nullptr) {
    return "pod has no controller (set drain.force to evict it)";
  }
  if (!spec.delete_empty_dir_data && pod.has_empty_dir) {
    return "pod has emptyDir local storage (set drain.deleteEmptyDirData to evict it)";
  }
  return "";
}

namespace {

struct Tracked {
  k8s::Pod pod;
  std::size_t stage = 0;
  bool evicted = false;  // the server accepted our eviction (never sent again)
  int attempts = 0;
  MonoTime next_try{};  // the backoff timer
  // While a budget in view allows nothing: the fallback retries max_backoff after this (the
  // last attempt, or when the wait began).
  bool waiting = false;
  MonoTime wait_from{};
  std::uint64_t budget_seen = 0;  // newest version of its budgets at the last attempt
  std::string last_error;
};

// Wakes a sleeping drain round when a budget covering a waiting pod comes to allow a
// disruption (called on the budget watch's thread).
struct Wake {
  std::mutex mu;
  bool pending = false;
  std::stop_source* sleeper = nullptr;  // the round's sleep, while it sleeps
  std::set<std::string> namespaces;     // of pods waiting on a budget

  void Notify(std::string_view ns) {
    std::scoped_lock lock(mu);
    if (!namespaces.contains(std::string(ns))) return;
    pending = true;
    if (sleeper) sleeper->request_stop();
  }
};

struct Attempt {
  Tracked* t;
  Status result;
};

// One drain, round by round: LIST, settle, evict what is due, sleep.
class DrainRun {
 public:
  DrainRun(PodApi& api, Clock& clock, const DrainerOptions& opts, std::string_view node,
           const DrainJob& spec, WallTime deadline)
      : api_(api), clock_(clock), opts_(opts), node_(node), spec_(spec), deadline_(deadline) {}

  DrainResult Run(std::stop_token stop);

 private:
  // Takes the round's LIST: pods gone are done, new ones tracked. A result when none is left.
  std::optional<DrainResult> Settle(const std::vector<k8s::Pod>& pods);
  DrainResult TimedOut(const std::string& list_error);
  // Evicts the due pods of the current (lowest) stage, max_concurrent_evictions at a time.
  void EvictDue();
  // Whether `t` is to be evicted now: its budgets allow it (and changed since a refusal), or,
  // with no budget in view or as the fallback, its timer is due.
  bool Due(Tracked& t, MonoTime mono, std::set<std::string>& waiting);
  // Disruptions a budget still allows this run (its status less what we spent on that status).
  int Room(const BudgetState& b) const;
  void Spend(const BudgetState& b);
  void Send(std::vector<Attempt>& batch);
  void Settled(Attempt& a, MonoTime mono);
  // Sleeps `d` or until a budget wakes the drain; false when stopped.
  bool Sleep(Duration d, std::stop_token stop);
  DrainResult Cancelled() {
    res_.state = DrainState::kCancelled;
    res_.message = "drain cancelled";
    return res_;
  }
  void Report(std::string_view r) {
    if (opts_.on_eviction) opts_.on_eviction(r);
  }

  PodApi& api_;
  Clock& clock_;
  const DrainerOptions& opts_;
  std::string_view node_;
  const DrainJob& spec_;
  WallTime deadline_;
  DrainResult res_;
  std::map<std::string, Tracked> tracked_;  // by pod UID
  std::vector<std::string> unevictable_;    // this round's pods that must not be evicted
  // Budget key -> (the status version we spent on, evictions accepted or sent against it).
  std::map<std::string, std::pair<std::uint64_t, int>> spent_;
  Wake wake_;
};

std::optional<DrainResult> DrainRun::Settle(const std::vector<k8s::Pod>& pods) {
  unevictable_.clear();
  std::map<std::string, const k8s::Pod*> present;
  int skipped = 0;
  for (const k8s::Pod& p : pods) {
    if (!Drainer::SkipReason(p, spec_).empty()) {
      ++skipped;
      continue;
    }
    if (std::string why = Drainer::Unevictable(p, spec_); !why.empty()) {
      unevictable_.push_back(p.meta.Key() + ": " + why);
      continue;
    }
    present[p.meta.uid] = &p;
  }
  res_.skipped = skipped;
  // Pods whose UID left the node are done; refresh the others' projection.
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    it = present.count(it->first) ? std::next(it) : tracked_.erase(it);
  }
  for (const auto& [uid, p] : present) {
    auto [it, inserted] = tracked_.try_emplace(uid);
    Tracked& t = it->second;
    t.pod = *p;
    if (inserted) {
      t.stage = Drainer::StageOf(*p, spec_.order);
      if (p->meta.deletion_timestamp) ++res_.waited_terminating;
    }
  }
  if (!tracked_.empty()) return std::nullopt;
  if (!unevictable_.empty()) {
    res_.state = DrainState::kBlocked;
    res_.blocking = unevictable_;
    res_.message = std::to_string(unevictable_.size()) + " pod(s) cannot be evicted";
    return res_;
  }
  res_.state = DrainState::kDone;
  res_.message = "evicted " + std::to_string(res_.evicted) + " pod(s)";
  return res_;
}

DrainResult DrainRun::TimedOut(const std::string& list_error) {
  res_.state = DrainState::kBlocked;
  res_.timed_out = true;
  for (const auto& [uid, t] : tracked_) {
    std::string why = t.pod.meta.deletion_timestamp ? "still terminating"
                      : t.evicted                   ? "evicted, not gone yet"
                      : !t.last_error.empty()       ? t.last_error
                                                    : "not evicted yet (earlier stage pending)";
    res_.blocking.push_back(t.pod.meta.Key() + ": " + why);
  }
  for (auto& u : unevictable_) res_.blocking.push_back(u);
  res_.message = "drain timed out with " + std::to_string(res_.blocking.size()) + " pod(s) left" +
                 (list_error.empty() ? "" : " (last error: " + list_error + ")");
  return res_;
}

void DrainRun::EvictDue() {
  // The current stage is the lowest one with pods left; later stages wait.
  std::size_t stage = tracked_.begin()->second.stage;
  for (const auto& [uid, t] : tracked_) stage = std::min(stage, t.stage);
  const MonoTime mono = clock_.Monotonic();
  std::vector<Attempt> batch;
  std::set<std::string> waiting;
  for (auto& [uid, t] : tracked_) {
    if (t.stage != stage || t.evicted || t.pod.meta.deletion_timestamp) continue;
    if (Due(t, mono, waiting)) batch.push_back({&t, OkStatus()});
  }
  {
    std::scoped_lock lock(wake_.mu);
    wake_.namespaces = std::move(waiting);
  }
  if (batch.empty()) return;
  Send(batch);
  const int before = res_.evicted;
  for (Attempt& a : batch) Settled(a, mono);
  if (res_.evicted > before) {
    opts_.log.Info("drain progress", {{"node", node_},
                                      {"evicted", res_.evicted},
                                      {"left", static_cast<long long>(tracked_.size())},
                                      {"stage", static_cast<long long>(stage)}});
  }
}

bool DrainRun::Due(Tracked& t, MonoTime mono, std::set<std::string>& waiting) {
  std::optional<std::vector<BudgetState>> cover;
  if (opts_.budgets) cover = opts_.budgets->Covering(t.pod);
  if (!cover || cover->empty()) return t.next_try <= mono;
  int room = INT_MAX;
  std::uint64_t newest = 0;
  const BudgetState* tightest = &cover->front();
  for (const BudgetState& b : *cover) {
    if (int r = Room(b); r < room) {
      room = r;
      tightest = &b;
    }
    newest = std::max(newest, b.version);
  }
  // Retried early only on news: a refusal under the very status that said "allowed" means
  // the cache lags (or the 429 was not the budget's), so that one waits for its timer.
  if (room > 0 && (t.attempts == 0 || newest > t.budget_seen)) {
    for (const BudgetState& b : *cover) Spend(b);
    t.budget_seen = newest;
    return true;
  }
  waiting.insert(t.pod.meta.namespace_);
  if (t.last_error.empty()) {
    t.last_error = "waiting for PodDisruptionBudget " + tightest->key + " to allow a disruption";
  }
  if (!t.waiting) {
    t.waiting = true;
    t.wait_from = mono;
  }
  return t.next_try <= mono && mono - t.wait_from >= opts_.max_backoff;  // the fallback
}

int DrainRun::Room(const BudgetState& b) const {
  auto it = spent_.find(b.key);
  const int spent = it != spent_.end() && it->second.first == b.version ? it->second.second : 0;
  return b.allowed - spent;
}

void DrainRun::Spend(const BudgetState& b) {
  auto& [version, n] = spent_[b.key];
  if (version != b.version) {
    version = b.version;
    n = 0;
  }
  ++n;
}

// Sends the batch's evictions, max_concurrent_evictions at a time.
void DrainRun::Send(std::vector<Attempt>& batch) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < batch.size(); i = next++) {
      k8s::DeleteOptions o;
      o.grace_period_seconds = spec_.grace_period_seconds;
      o.precondition_uid = batch[i].t->pod.meta.uid;
      batch[i].result = api_.Evict(batch[i].t->pod, o);
    }
  };
  const std::size_t n =
      std::min<std::size_t>(batch.size(), static_cast<std::size_t>(opts_.max_concurrent_evictions));
  if (n == 1) {
    work();
    return;
  }
  std::vector<std::jthread> workers;
  workers.reserve(n);
  for (std::size_t i = 0; i < n; ++i) workers.emplace_back(work);
}

// One eviction's answer: accepted, gone already, or refused (back off per pod).
void DrainRun::Settled(Attempt& a, MonoTime mono) {
  Tracked& t = *a.t;
  if (a.result.ok()) {
    t.evicted = true;
    ++res_.evicted;
    Report(kEvictionSuccess);
    return;
  }
  if (IsNotFound(a.result)) {
    t.evicted = true;  // gone already; the next LIST settles it
    Report(kEvictionGone);
    return;
  }
  const bool pdb = k8s::IsTooManyRequests(a.result);
  Report(pdb ? kEvictionBlocked : kEvictionError);
  ++t.attempts;
  t.wait_from = mono;
  Duration backoff = opts_.initial_backoff;
  for (int i = 1; i < t.attempts && backoff < opts_.max_backoff; ++i) backoff *= 2;
  backoff = std::min(backoff, opts_.max_backoff);
  if (a.result.retry_after_seconds() > 0) {
    backoff = std::max<Duration>(backoff, std::chrono::seconds(a.result.retry_after_seconds()));
  }
  t.next_try = mono + backoff;
  if (t.last_error != a.result.message()) {  // said once per pod and cause, not per retry
    opts_.log.Info(pdb ? "drain blocked by a PodDisruptionBudget" : "eviction failed",
                   {{"node", node_}, {"pod", t.pod.meta.Key()}, {"detail", a.result.message()}});
  }
  t.last_error = a.result.message();
}

bool DrainRun::Sleep(Duration d, std::stop_token stop) {
  std::stop_source woken;
  {
    std::scoped_lock lock(wake_.mu);
    if (wake_.pending) {
      wake_.pending = false;
      return !stop.stop_requested();
    }
    wake_.sleeper = &woken;
  }
  {
    std::stop_callback link(stop, [&woken] { woken.request_stop(); });
    (void)clock_.SleepFor(d, woken.get_token());
  }
  std::scoped_lock lock(wake_.mu);
  wake_.sleeper = nullptr;
  wake_.pending = false;
  return !stop.stop_requested();
}

DrainResult DrainRun::Run(std::stop_token stop) {
  std::uint64_t sub = 0;
  if (opts_.budgets)
    sub = opts_.budgets->Subscribe([this](std::string_view ns) { wake_.Notify(ns); });
  struct Unsubscribe {
    BudgetWatch* w;
    std::uint64_t id;
    ~Unsubscribe() {
      if (w) w->Unsubscribe(id);
    }
  } unsubscribe{opts_.budgets, sub};
  std::string list_error;
  while (true) {
    if (stop.stop_requested()) return Cancelled();
    unevictable_.clear();
    auto pods = api_.ListPodsOnNode(node_);
    if (pods.ok()) {
      list_error.clear();
      if (auto done = Settle(*pods)) return *done;
    } else {
      list_error = pods.status().ToString();
    }
    if (clock_.Now() >= deadline_) return TimedOut(list_error);
    if (pods.ok()) EvictDue();
    Duration sleep = opts_.poll_interval;
    const Duration to_deadline = deadline_ - clock_.Now();
    if (to_deadline < sleep) sleep = std::max<Duration>(to_deadline, Duration(0));
    if (!Sleep(sleep, stop)) return Cancelled();
  }
}

}  // namespace

DrainResult Drainer::Drain(std::string_view node, const DrainJob& spec, WallTime deadline,
                           std::stop_token stop) {
  return DrainRun(api_, clock_, opts_, node, spec, deadline).Run(stop);
}

}  // namespace gg::remediation
