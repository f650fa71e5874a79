// Drainer tests against an in-memory PodApi with PDB-like budgets and a kubelet that removes
// terminating pods on the next list. Assertions are about the world: which pods are left,
// how often each UID was evicted, what was gone when a later stage was evicted.
#include "remediation/drainer.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace gg::remediation {
namespace {

using namespace std::chrono_literals;

k8s::Pod MakePod(std::string name, std::string node, int gpus,
                 std::string owner_kind = "ReplicaSet", std::optional<int> priority = std::nullopt,
                 std::string app = "") {
  k8s::Pod p;
  p.meta.name = std::move(name);
  p.meta.namespace_ = "ml";
  p.meta.uid = "uid-" + p.meta.name;
  if (!owner_kind.empty()) {
    p.meta.owner_references.push_back({"apps/v1", owner_kind, "owner", "owner-uid", true});
  }
  if (!app.empty()) p.meta.labels.Set("app", app);
  p.node_name = std::move(node);
  p.phase = "Running";
  p.gpu_requests = gpus;
  p.priority = priority;
  return p;
}

class FakePodApi final : public PodApi {
 public:
  void Add(k8s::Pod p) {
    std::scoped_lock lock(mu_);
    pods_[p.meta.uid] = std::move(p);
  }
  // `app` pods may have at most `allowed` evictions in flight (terminating).
  void SetBudget(std::string app, int allowed) {
    std::scoped_lock lock(mu_);
    budget_[app] = allowed;
    ++budget_version_;
  }
  // The budget of `app` as a watch on it would show it: (allowed, version).
  std::optional<std::pair<int, std::uint64_t>> Budget(const std::string& app) {
    std::scoped_lock lock(mu_);
    auto it = budget_.find(app);
    if (it == budget_.end()) return std::nullopt;
    return std::make_pair(it->second, budget_version_);
  }
  void SetKubeletStalled(bool stalled) {
    std::scoped_lock lock(mu_);
    stalled_ = stalled;
  }

  StatusOr<std::vector<k8s::Pod>> ListPodsOnNode(std::string_view node) override {
    std::scoped_lock lock(mu_);
    ++lists_;
    // Kubelet: pods terminating since the previous list are gone now.
    if (!stalled_) {
      for (auto it = pods_.begin(); it != pods_.end();) {
        if (terminating_seen_.count(it->first)) {
          auto app = it->second.meta.labels.Get("app");
          if (app && budget_.count(std::string(*app))) {
            ++budget_[std::string(*app)];
            ++budget_version_;
          }
          terminating_seen_.erase(it->first);
          it = pods_.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& [uid, p] : pods_) {
        if (p.meta.deletion_timestamp) terminating_seen_.insert(uid);
      }
    }
    std::vector<k8s::Pod> out;
    for (auto& [uid, p] : pods_) {
      if (p.node_name == node) out.push_back(p);
    }
    return out;
  }

  Status Evict(const k8s::Pod& pod, const k8s::DeleteOptions& o) override {
    std::scoped_lock lock(mu_);
    auto it = pods_.find(pod.meta.uid);
    if (it == pods_.end()) return NotFoundError("pods \"" + pod.meta.name + "\" not found");
    if (o.precondition_uid != pod.meta.uid) return AbortedError("uid precondition");
    auto app = it->second.meta.labels.Get("app");
    if (app && budget_.count(std::string(*app))) {
      int& allowed = budget_[std::string(*app)];
      if (allowed <= 0) {
        ++refused_;
        return ResourceExhaustedError(
                   "Cannot evict pod as it would violate the pod's disruption budget " +
                   std::string(*app) + "-pdb")
            .set_http_status(429);
      }
      --allowed;
      ++budget_version_;
    }
    ++evictions_[pod.meta.uid];
    std::set<std::string> left;
    for (auto& [uid, p] : pods_) {
      if (!p.meta.deletion_timestamp) left.insert(p.meta.name);
    }
    left_at_eviction_[pod.meta.name] = left;
    it->second.meta.deletion_timestamp = WallTime(1s);
    return OkStatus();
  }

  std::map<std::string, int> Evictions() {
    std::scoped_lock lock(mu_);
    return evictions_;
  }
  std::set<std::string> LeftWhenEvicted(const std::string& name) {
    std::scoped_lock lock(mu_);
    return left_at_eviction_[name];
  }
  std::set<std::string> Names() {
    std::scoped_lock lock(mu_);
    std::set<std::string> out;
    for (auto& [uid, p] : pods_) out.insert(p.meta.name);
    return out;
  }
  int Refused() {
    std::scoped_lock lock(mu_);
    return refused_;
  }
  int Lists() {
    std::scoped_lock lock(mu_);
    return lists_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, k8s::Pod> pods_;
  std::map<std::string, int> budget_;
  std::uint64_t budget_version_ = 1;
  std::set<std::string> terminating_seen_;
  std::map<std::string, int> evictions_;
  std::map<std::string, std::set<std::string>> left_at_eviction_;
  bool stalled_ = false;
  int refused_ = 0;
  int lists_ = 0;
};

DrainerOptions FastOptions() {
  DrainerOptions o;
  o.poll_interval = 5ms;
  o.initial_backoff = 10ms;
  o.max_backoff = 40ms;
  return o;
}

// A budget watch over FakePodApi's budgets (one "<app>-pdb" per app label). `lag` makes it
// show a stale allowance instead (a cache behind the server).
class FakeBudgets final : public BudgetWatch {
 public:
  explicit FakeBudgets(FakePodApi& api) : api_(api) {}
  std::optional<std::vector<BudgetState>> Covering(const k8s::Pod& pod) const override {
    auto app = pod.meta.labels.Get("app");
    if (!app) return std::vector<BudgetState>{};
    auto b = api_.Budget(std::string(*app));
    if (!b) return std::vector<BudgetState>{};
    if (stale_allowed_)
      return std::vector<BudgetState>{{"ml/" + std::string(*app) + "-pdb", *stale_allowed_, 1}};
    return std::vector<BudgetState>{{"ml/" + std::string(*app) + "-pdb", b->first, b->second}};
  }
  std::uint64_t Subscribe(std::function<void(std::string_view)> fn) override {
    std::scoped_lock lock(mu_);
    subs_[++next_] = std::move(fn);
    return next_;
  }
  void Unsubscribe(std::uint64_t id) override {
    std::scoped_lock lock(mu_);
    subs_.erase(id);
  }
  void Notify(std::string_view ns) {
    std::scoped_lock lock(mu_);
    for (auto& [id, fn] : subs_) fn(ns);
  }
  void ShowStale(int allowed) { stale_allowed_ = allowed; }

 private:
  FakePodApi& api_;
  std::optional<int> stale_allowed_;
  std::mutex mu_;
  std::map<std::uint64_t, std::function<void(std::string_view)>> subs_;
  std::uint64_t next_ = 0;
};

WallTime Far() { return RealClock::Default().Now() + 60s; }

TEST(DrainerTest, EvictsGpuPodsSkipsDaemonSetMirrorFinishedAndCpuPods) {
  FakePodApi api;
  api.Add(MakePod("train-1", "n1", 4));
  api.Add(MakePod("infer-1", "n1", 1));
  api.Add(MakePod("agent-x", "n1", 0, "DaemonSet"));
  api.Add(MakePod("plugin-x", "n1", 8, "DaemonSet"));  // DaemonSet even if it holds GPUs
  k8s::Pod mirror = MakePod("static-x", "n1", 1, "Node");
  mirror.meta.annotations.Set(k8s::kMirrorPodAnnotation, "abc");
  api.Add(mirror);
  k8s::Pod done = MakePod("job-done", "n1", 1);
  done.phase = "Succeeded";
  api.Add(done);
  api.Add(MakePod("cpu-1", "n1", 0));
  api.Add(MakePod("other-node", "n2", 1));
  k8s::Pod claim = MakePod("dra-1", "n1", 0);
  claim.resource_claims = {"gpu-claim"};
  api.Add(claim);

  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  EXPECT_EQ(r.state, DrainState::kDone) << r.message;
  EXPECT_EQ(r.evicted, 3);
  EXPECT_EQ(api.Names(), (std::set<std::string>{"agent-x", "plugin-x", "static-x", "job-done",
                                                "cpu-1", "other-node"}));
}

TEST(DrainerTest, AllPodsScopeEvictsCpuPodsToo) {
  FakePodApi api;
  api.Add(MakePod("train-1", "n1", 4));
  api.Add(MakePod("cpu-1", "n1", 0));
  api.Add(MakePod("agent-x", "n1", 0, "DaemonSet"));
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainJob spec;
  spec.scope = DrainScope::kAllPods;
  EXPECT_EQ(d.Drain("n1", spec, Far(), {}).state, DrainState::kDone);
  EXPECT_EQ(api.Names(), (std::set<std::string>{"agent-x"}));
}

TEST(DrainerTest, LowPriorityStageGoesBeforeLatencyCritical) {
  FakePodApi api;
  api.Add(MakePod("batch-1", "n1", 1, "ReplicaSet", 100));
  api.Add(MakePod("batch-2", "n1", 1, "ReplicaSet", std::nullopt));
  api.Add(MakePod("infer-1", "n1", 1, "ReplicaSet", 100000));
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainJob spec;
  spec.order = {DrainStage{1000, std::nullopt}, DrainStage{}};
  DrainResult r = d.Drain("n1", spec, Far(), {});
  ASSERT_EQ(r.state, DrainState::kDone);
  // When infer-1 was evicted, no batch pod was left running.
  auto left = api.LeftWhenEvicted("infer-1");
  EXPECT_FALSE(left.count("batch-1"));
  EXPECT_FALSE(left.count("batch-2"));
  EXPECT_TRUE(api.LeftWhenEvicted("batch-1").count("infer-1"));
}

TEST(DrainerTest, StageOfUsesFirstMatchAndImplicitLast) {
  std::vector<DrainStage> order = {DrainStage{1000, std::nullopt}};
  EXPECT_EQ(Drainer::StageOf(MakePod("a", "n", 1, "ReplicaSet", 5), order), 0u);
  EXPECT_EQ(Drainer::StageOf(MakePod("b", "n", 1, "ReplicaSet", 5000), order), 1u);
  k8s::LabelSelector sel;
  sel.match_labels["tier"] = "batch";
  order = {DrainStage{std::nullopt, sel}, DrainStage{}};
  k8s::Pod p = MakePod("c", "n", 1);
  EXPECT_EQ(Drainer::StageOf(p, order), 1u);
  p.meta.labels.Set("tier", "batch");
  EXPECT_EQ(Drainer::StageOf(p, order), 0u);
}

TEST(DrainerTest, PdbRefusalsBackOffAndFinishWithinBudget) {
  FakePodApi api;
  for (int i = 0; i < 4; ++i)
    api.Add(MakePod("infer-" + std::to_string(i), "n1", 1, "ReplicaSet", {}, "infer"));
  api.SetBudget("infer", 1);
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  EXPECT_EQ(r.state, DrainState::kDone) << r.message;
  EXPECT_EQ(r.evicted, 4);
  for (auto& [uid, n] : api.Evictions()) EXPECT_EQ(n, 1) << uid;
  // Backoff, not a tight loop: refusals stay far below what spinning would produce.
  EXPECT_LT(api.Refused(), 40);
}

// A budget that frees up is used at once: the retry timer (10 s) never runs out, yet the drain
// is done in well under it, and no eviction is sent that the budget did not allow.
TEST(DrainerTest, RefusedEvictionRetriedWhenItsBudgetAllowsNotWhenTheTimerRunsOut) {
  FakePodApi api;
  for (int i = 0; i < 3; ++i)
    api.Add(MakePod("infer-" + std::to_string(i), "n1", 1, "ReplicaSet", {}, "infer"));
  api.Add(MakePod("other-0", "n1", 1, "ReplicaSet", {}, "other"));
  api.SetBudget("infer", 0);
  api.SetBudget("other", 0);
  FakeBudgets budgets(api);
  DrainerOptions o;
  o.poll_interval = 20ms;
  o.initial_backoff = 10s;
  o.max_backoff = 10s;
  o.budgets = &budgets;
  Drainer d(api, RealClock::Default(), o);
  // "Replacements turn Ready": every 100 ms a budget at 0 allows one disruption again.
  std::jthread replacements([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      std::this_thread::sleep_for(100ms);
      for (const char* app : {"infer", "other"}) {
        if (auto b = api.Budget(app); b && b->first == 0) api.SetBudget(app, 1);
      }
      budgets.Notify("ml");
    }
  });
  const MonoTime t0 = RealClock::Default().Monotonic();
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  const Duration took = RealClock::Default().Monotonic() - t0;
  EXPECT_EQ(r.state, DrainState::kDone) << r.message;
  EXPECT_EQ(r.evicted, 4);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(api.Refused(), 0);
  EXPECT_TRUE(api.Names().empty());
  for (auto& [uid, n] : api.Evictions()) EXPECT_EQ(n, 1) << uid;
}

// A cache behind the server either way still finishes on the capped fallback timer, without
// a tight loop: it shows "allowed" while the server refuses, or "none" while the server allows.
TEST(DrainerTest, StaleBudgetViewFallsBackToTheCappedTimer) {
  for (int shown : {1, 0}) {
    FakePodApi api;
    for (int i = 0; i < 3; ++i)
      api.Add(MakePod("infer-" + std::to_string(i), "n1", 1, "ReplicaSet", {}, "infer"));
    api.SetBudget("infer", shown == 1 ? 0 : 1);
    FakeBudgets budgets(api);
    budgets.ShowStale(shown);
    DrainerOptions o = FastOptions();
    o.budgets = &budgets;
    Drainer d(api, RealClock::Default(), o);
    std::jthread release([&] {
      std::this_thread::sleep_for(150ms);
      api.SetBudget("infer", 3);
    });
    DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
    EXPECT_EQ(r.state, DrainState::kDone) << "shown " << shown << ": " << r.message;
    EXPECT_TRUE(api.Names().empty()) << "shown " << shown;
    EXPECT_LT(api.Refused(), 40) << "shown " << shown;
  }
}

// Past the deadline with a budget in view that never allows: Blocked, naming the budget.
TEST(DrainerTest, TimeoutWhileWaitingOnABudgetNamesIt) {
  FakePodApi api;
  api.Add(MakePod("infer-0", "n1", 1, "ReplicaSet", {}, "infer"));
  api.SetBudget("infer", 0);
  FakeBudgets budgets(api);
  DrainerOptions o = FastOptions();
  o.max_backoff = 10s;
  o.budgets = &budgets;
  Drainer d(api, RealClock::Default(), o);
  DrainResult r = d.Drain("n1", DrainJob{}, RealClock::Default().Now() + 200ms, {});
  EXPECT_EQ(r.state, DrainState::kBlocked);
  ASSERT_EQ(r.blocking.size(), 1u);
  EXPECT_NE(r.blocking[0].find("ml/infer-pdb"), std::string::npos) << r.blocking[0];
  EXPECT_EQ(api.Refused(), 0);  // the budget said no: nothing was sent
}

TEST(DrainerTest, TimeoutIsBlockedAndNamesPodsAndPdb) {
  FakePodApi api;
  api.Add(MakePod("infer-0", "n1", 1, "ReplicaSet", {}, "infer"));
  api.Add(MakePod("train-0", "n1", 1));
  api.SetBudget("infer", 0);
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, RealClock::Default().Now() + 300ms, {});
  EXPECT_EQ(r.state, DrainState::kBlocked);
  ASSERT_EQ(r.blocking.size(), 1u);
  EXPECT_NE(r.blocking[0].find("ml/infer-0"), std::string::npos);
  EXPECT_NE(r.blocking[0].find("infer-pdb"), std::string::npos);
  EXPECT_EQ(api.Names(), (std::set<std::string>{"infer-0"}));
}

TEST(DrainerTest, ResumedDrainDoesNotReEvictTerminatingPods) {
  FakePodApi api;
  k8s::Pod going = MakePod("train-0", "n1", 1);
  going.meta.deletion_timestamp = WallTime(5s);  // evicted by a previous operator instance
  api.Add(going);
  api.Add(MakePod("train-1", "n1", 1));
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  EXPECT_EQ(r.state, DrainState::kDone);
  EXPECT_EQ(r.evicted, 1);
  EXPECT_EQ(r.waited_terminating, 1);
  auto ev = api.Evictions();
  EXPECT_EQ(ev.count("uid-train-0"), 0u);
  EXPECT_EQ(ev["uid-train-1"], 1);
}

TEST(DrainerTest, WaitsForTerminationBeforeDone) {
  FakePodApi api;
  api.Add(MakePod("train-0", "n1", 1));
  api.SetKubeletStalled(true);
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, RealClock::Default().Now() + 200ms, {});
  EXPECT_EQ(r.state, DrainState::kBlocked);
  ASSERT_EQ(r.blocking.size(), 1u);
  EXPECT_NE(r.blocking[0].find("terminating"), std::string::npos);
  EXPECT_EQ(api.Evictions()["uid-train-0"], 1);
}

TEST(DrainerTest, UnreplicatedPodNeedsForce) {
  FakePodApi api;
  api.Add(MakePod("bare", "n1", 1, ""));
  api.Add(MakePod("train-0", "n1", 1));
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  EXPECT_EQ(r.state, DrainState::kBlocked);
  EXPECT_EQ(api.Names(), (std::set<std::string>{"bare"}));
  DrainJob force;
  force.force = true;
  EXPECT_EQ(d.Drain("n1", force, Far(), {}).state, DrainState::kDone);
  EXPECT_TRUE(api.Names().empty());
}

TEST(DrainerTest, StopCancels) {
  FakePodApi api;
  api.Add(MakePod("infer-0", "n1", 1, "ReplicaSet", {}, "infer"));
  api.SetBudget("infer", 0);
  std::stop_source src;
  Drainer d(api, RealClock::Default(), FastOptions());
  std::jthread stopper([&] {
    std::this_thread::sleep_for(50ms);
    src.request_stop();
  });
  EXPECT_EQ(d.Drain("n1", DrainJob{}, Far(), src.get_token()).state, DrainState::kCancelled);
}

TEST(DrainerTest, ManyPodsEvictedConcurrentlyOnce) {
  FakePodApi api;
  for (int i = 0; i < 200; ++i) api.Add(MakePod("p" + std::to_string(i), "n1", 1));
  std::atomic<int> ok{0};
  DrainerOptions o = FastOptions();
  o.on_eviction = [&](std::string_view r) {
    if (r == kEvictionSuccess) ++ok;
  };
  Drainer d(api, RealClock::Default(), o);
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  EXPECT_EQ(r.state, DrainState::kDone);
  EXPECT_EQ(ok.load(), 200);
  for (auto& [uid, n] : api.Evictions()) EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace gg::remediation

namespace gg::remediation {
namespace {

TEST(DrainerTest, DeviceLevelDrainEvictsOnlyTheHoldersOfTheBadGpu) {
  FakePodApi api;
  k8s::Pod bad = MakePod("holds-bad", "n1", 0);
  bad.resource_claims = {"c1"};
  k8s::Pod good = MakePod("holds-good", "n1", 0);
  good.resource_claims = {"c2"};
  api.Add(bad);
  api.Add(good);
  api.Add(MakePod("train-1", "n1", 4));  // a device-plugin GPU pod: not holding the DRA device
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainJob spec;
  spec.pod_uids = std::set<std::string>{"uid-holds-bad"};
  DrainResult r = d.Drain("n1", spec, Far(), {});
  EXPECT_EQ(r.state, DrainState::kDone) << r.message;
  EXPECT_EQ(r.evicted, 1);
  EXPECT_EQ(api.Names(), (std::set<std::string>{"holds-good", "train-1"}));
  // No holder at all: done at once, nothing evicted.
  spec.pod_uids = std::set<std::string>{};
  DrainResult none = d.Drain("n1", spec, Far(), {});
  EXPECT_EQ(none.state, DrainState::kDone);
  EXPECT_EQ(none.evicted, 0);
  EXPECT_EQ(api.Names().size(), 2u);
}

}  // namespace
}  // namespace gg::remediation
