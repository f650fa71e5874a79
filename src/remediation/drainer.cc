// Drainer: one round = LIST the node's pods, settle what is gone, evict what is due (bounded
// concurrency), then sleep; repeated until done, the deadline, or stop.
#include "remediation/drainer.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "k8s/codec.h"
#include "k8s/errors.h"

namespace gg::remediation {

std::string_view DrainStateName(DrainState s) {
  switch (s) {
    case DrainState::kDone: return "Done";
    case DrainState::kBlocked: return "Blocked";
    case DrainState::kCancelled: return "Cancelled";
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
    if (st.selector && !st.selector->Matches(pod.meta.labels)) continue;
    return i;
  }
  return order.size();
}

std::string_view Drainer::SkipReason(const k8s::Pod& pod, const DrainSpec& spec) {
  if (pod.IsFinished()) return "finished";
  if (pod.ControllerKind() == "DaemonSet") return "daemonset";
  if (pod.IsMirror()) return "mirror";
  if (spec.scope == DrainScope::kGpuPods && pod.gpu_requests <= 0 && pod.resource_claims.empty()) {
    return "out-of-scope";
  }
  if (spec.pod_uids && !spec.pod_uids->contains(pod.meta.uid)) return "out-of-scope";
  return "";
}

std::string Drainer::Unevictable(const k8s::Pod& pod, const DrainSpec& spec) {
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
  MonoTime next_try{};
  std::string last_error;
};

struct Attempt {
  Tracked* t;
  Status result;
};

}  // namespace

DrainResult Drainer::Drain(std::string_view node, const DrainSpec& spec, WallTime deadline,
                           std::stop_token stop) {
  DrainResult res;
  std::map<std::string, Tracked> tracked;  // by pod UID
  std::string list_error;
  auto report = [&](std::string_view r) {
    if (opts_.on_eviction) opts_.on_eviction(r);
  };

  while (true) {
    if (stop.stop_requested()) {
      res.state = DrainState::kCancelled;
      res.message = "drain cancelled";
      return res;
    }
    auto pods = api_.ListPodsOnNode(node);
    std::vector<std::string> unevictable;
    if (pods.ok()) {
      list_error.clear();
      std::map<std::string, const k8s::Pod*> present;
      int skipped = 0;
      for (const k8s::Pod& p : *pods) {
        if (!SkipReason(p, spec).empty()) {
          ++skipped;
          continue;
        }
        if (std::string why = Unevictable(p, spec); !why.empty()) {
          unevictable.push_back(p.meta.Key() + ": " + why);
          continue;
        }
        present[p.meta.uid] = &p;
      }
      res.skipped = skipped;
      // Pods whose UID left the node are done; refresh the others' projection.
      for (auto it = tracked.begin(); it != tracked.end();) {
        it = present.count(it->first) ? std::next(it) : tracked.erase(it);
      }
      for (const auto& [uid, p] : present) {
        auto [it, inserted] = tracked.try_emplace(uid);
        Tracked& t = it->second;
        t.pod = *p;
        if (inserted) {
          t.stage = StageOf(*p, spec.order);
          if (p->meta.deletion_timestamp) ++res.waited_terminating;
        }
      }
      if (tracked.empty()) {
        if (!unevictable.empty()) {
          res.state = DrainState::kBlocked;
          res.blocking = unevictable;
          res.message = std::to_string(unevictable.size()) + " pod(s) cannot be evicted";
          return res;
        }
        res.state = DrainState::kDone;
        res.message = "evicted " + std::to_string(res.evicted) + " pod(s)";
        return res;
      }
    } else {
      list_error = pods.status().ToString();
    }

    const WallTime now_wall = clock_.Now();
    if (now_wall >= deadline) {
      res.state = DrainState::kBlocked;
      for (const auto& [uid, t] : tracked) {
        std::string why = t.pod.meta.deletion_timestamp ? "still terminating"
                          : t.evicted                    ? "evicted, not gone yet"
                          : !t.last_error.empty()        ? t.last_error
                                                         : "not evicted yet (earlier stage pending)";
        res.blocking.push_back(t.pod.meta.Key() + ": " + why);
      }
      for (auto& u : unevictable) res.blocking.push_back(u);
      res.message = "drain timed out with " + std::to_string(res.blocking.size()) +
                    " pod(s) left" + (list_error.empty() ? "" : " (last error: " + list_error + ")");
      return res;
    }

    if (pods.ok()) {
      // The current stage is the lowest one with pods left; later stages wait.
      std::size_t stage = tracked.begin()->second.stage;
      for (const auto& [uid, t] : tracked) stage = std::min(stage, t.stage);
      const MonoTime mono = clock_.Monotonic();
      std::vector<Attempt> batch;
      for (auto& [uid, t] : tracked) {
        if (t.stage != stage || t.evicted || t.pod.meta.deletion_timestamp || t.next_try > mono) {
          continue;
        }
        batch.push_back({&t, OkStatus()});
      }
      if (!batch.empty()) {
        std::atomic<std::size_t> next{0};
        auto work = [&] {
          for (std::size_t i = next++; i < batch.size(); i = next++) {
            k8s::DeleteOptions o;
            o.grace_period_seconds = spec.grace_period_seconds;
            o.precondition_uid = batch[i].t->pod.meta.uid;
            batch[i].result = api_.Evict(batch[i].t->pod, o);
          }
        };
        const std::size_t n =
            std::min<std::size_t>(batch.size(), static_cast<std::size_t>(opts_.max_concurrent_evictions));
        if (n == 1) {
          work();
        } else {
          std::vector<std::jthread> workers;
          workers.reserve(n);
          for (std::size_t i = 0; i < n; ++i) workers.emplace_back(work);
        }
        for (Attempt& a : batch) {
          Tracked& t = *a.t;
          if (a.result.ok()) {
            t.evicted = true;
            ++res.evicted;
            report(kEvictionSuccess);
            continue;
          }
          if (IsNotFound(a.result)) {
            t.evicted = true;  // gone already; the next LIST settles it
            report(kEvictionGone);
            continue;
          }
          report(k8s::IsTooManyRequests(a.result) ? kEvictionBlocked : kEvictionError);
          ++t.attempts;
          Duration backoff = opts_.initial_backoff;
          for (int i = 1; i < t.attempts && backoff < opts_.max_backoff; ++i) backoff *= 2;
          backoff = std::min(backoff, opts_.max_backoff);
          if (a.result.retry_after_seconds() > 0) {
            backoff = std::max<Duration>(backoff, std::chrono::seconds(a.result.retry_after_seconds()));
          }
          t.next_try = mono + backoff;
          t.last_error = a.result.message();
        }
      }
    }

    Duration sleep = opts_.poll_interval;
    const Duration to_deadline = deadline - clock_.Now();
    if (to_deadline < sleep) sleep = std::max<Duration>(to_deadline, Duration(0));
    if (!clock_.SleepFor(sleep, stop)) {
      res.state = DrainState::kCancelled;
      res.message = "drain cancelled";
      return res;
    }
  }
}

}  // namespace gg::remediation
