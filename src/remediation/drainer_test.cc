// Drainer tests against an in-memory PodApi with PDB-like budgets and a kubelet that removes
// terminating pods on the next list. Assertions are about the world: which pods are left,
// how often each UID was evicted, what was gone when a later stage was evicted.
#include "remediation/drainer.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

namespace gg::remediation {
namespace {

using namespace std::chrono_literals;

k8s::Pod MakePod(std::string name, std::string node, int gpus, std::string owner_kind = "ReplicaSet",
                 std::optional<int> priority = std::nullopt, std::string app = "") {
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
          if (app && budget_.count(std::string(*app))) ++budget_[std::string(*app)];
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
  for (int i = 0; i < 4; ++i) api.Add(MakePod("infer-" + std::to_string(i), "n1", 1, "ReplicaSet", {}, "infer"));
  api.SetBudget("infer", 1);
  Drainer d(api, RealClock::Default(), FastOptions());
  DrainResult r = d.Drain("n1", DrainJob{}, Far(), {});
  EXPECT_EQ(r.state, DrainState::kDone) << r.message;
  EXPECT_EQ(r.evicted, 4);
  for (auto& [uid, n] : api.Evictions()) EXPECT_EQ(n, 1) << uid;
  // Backoff, not a tight loop: refusals stay far below what spinning would produce.
  EXPECT_LT(api.Refused(), 40);
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
