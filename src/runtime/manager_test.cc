// Unit tests for Manager: start order, readiness/liveness, sync timeout, lost lease,
// runnable failure and bounded shutdown — with fake runnables, caches and election.
#include "runtime/manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace gg::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

template <typename F>
bool Eventually(F f, std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return f();
}

// Ordered record of what happened, shared by all fakes of one test.
class Journal {
 public:
  void Note(std::string e) {
    std::scoped_lock lock(mu_);
    events_.push_back(std::move(e));
  }
  std::vector<std::string> Events() const {
    std::scoped_lock lock(mu_);
    return events_;
  }
  bool Has(const std::string& e) const {
    auto v = Events();
    return std::find(v.begin(), v.end(), e) != v.end();
  }
  // Index of an event (-1 if absent).
  int At(const std::string& e) const {
    auto v = Events();
    auto it = std::find(v.begin(), v.end(), e);
    return it == v.end() ? -1 : static_cast<int>(it - v.begin());
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> events_;
};

void BlockUntil(std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait(lock, stop, [] { return false; });
}

class FakeRunnable : public Runnable {
 public:
  FakeRunnable(std::string name, Journal& j, bool leader) : name_(name), j_(j), leader_(leader) {}
  std::string Name() const override { return name_; }
  bool NeedsLeaderElection() const override { return leader_; }
  Status Run(std::stop_token stop) override {
    j_.Note(name_ + ":start");
    if (!fail_with.ok()) return fail_with;
    BlockUntil(stop);
    if (ignore_stop_for > milliseconds(0)) std::this_thread::sleep_for(ignore_stop_for);
    j_.Note(name_ + ":stop");
    finished = true;
    return OkStatus();
  }
  Status fail_with;
  milliseconds ignore_stop_for{0};
  std::atomic<bool> finished{false};

 private:
  std::string name_;
  Journal& j_;
  bool leader_;
};

class FakeElection : public LeaderElection {
 public:
  explicit FakeElection(Journal& j) : j_(j) {}
  Status Run(std::stop_token stop,
             std::function<void(std::stop_token)> on_started_leading) override {
    j_.Note("election:start");
    std::unique_lock lock(mu_);
    cv_.wait(lock, stop, [&] { return granted_; });
    if (stop.stop_requested()) return OkStatus();
    leading_ = true;
    lock.unlock();
    on_started_leading(leading_source_.get_token());
    lock.lock();
    cv_.wait(lock, stop, [&] { return lost_; });
    leading_ = false;
    leading_source_.request_stop();
    if (lost_) {
      j_.Note("election:lost");
      return AbortedError("lease taken by another holder");
    }
    j_.Note("election:released");
    return OkStatus();
  }
  bool IsLeader() const override {
    std::scoped_lock lock(mu_);
    return leading_;
  }
  void Grant() {
    std::scoped_lock lock(mu_);
    granted_ = true;
    cv_.notify_all();
  }
  void Lose() {
    std::scoped_lock lock(mu_);
    lost_ = true;
    cv_.notify_all();
  }

 private:
  Journal& j_;
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool granted_ = false;
  bool lost_ = false;
  bool leading_ = false;
  std::stop_source leading_source_;
};

class ManagerTest : public ::testing::Test {
 protected:
  ManagerOptions Options() {
    ManagerOptions o;
    o.cache_sync_timeout = seconds(30);
    return o;
  }
  Journal j_;
  metrics::Registry registry_;
  metrics::HealthServer server_{registry_};
  FakeRunnable cache_{"cache", j_, false};
  std::atomic<bool> synced_{false};
  FakeRunnable agent_{"agent", j_, false};
  FakeRunnable reconciler_{"reconciler", j_, true};
  FakeElection election_{j_};
};

TEST_F(ManagerTest, StartOrderAndOrderlyShutdown) {
  Manager m(Options(), Logger(), &server_, &election_);
  m.AddCache(cache_, [&] { return synced_.load(); });
  m.Add(agent_);
  m.Add(reconciler_);
  std::stop_source stop;
  Status result = UnknownError("not returned");
  std::thread runner([&] { result = m.Run(stop.get_token()); });

  ASSERT_TRUE(Eventually([&] { return j_.Has("cache:start"); }));
  EXPECT_TRUE(server_.Running());  // the server comes first
  EXPECT_GT(m.HealthPort(), 0);
  EXPECT_EQ(server_.Handle("/readyz", "").status, 500);  // caches not synced
  EXPECT_FALSE(j_.Has("agent:start"));                   // nothing else before sync
  synced_ = true;
  ASSERT_TRUE(Eventually([&] { return j_.Has("election:start"); }));
  EXPECT_TRUE(m.CachesSynced());
  EXPECT_EQ(server_.Handle("/readyz", "").status, 200);
  ASSERT_TRUE(Eventually([&] { return j_.Has("agent:start"); }));
  EXPECT_FALSE(j_.Has("reconciler:start"));  // not before the lease
  EXPECT_FALSE(m.Leading());
  election_.Grant();
  ASSERT_TRUE(Eventually([&] { return j_.Has("reconciler:start"); }));
  EXPECT_TRUE(m.Leading());
  EXPECT_EQ(server_.Handle("/healthz", "").status, 200);

  auto t0 = std::chrono::steady_clock::now();
  stop.request_stop();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(5));
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_FALSE(server_.Running());  // the manager started it, the manager stops it

  // (Runnables of one phase run on their own threads, so only phase order is asserted:
  // nothing but the cache before the sync, no leader work before the lease.)
  EXPECT_LT(j_.At("cache:start"), j_.At("agent:start"));
  EXPECT_LT(j_.At("election:start"), j_.At("reconciler:start"));
  // Leader work stops before the lease is released; the rest after.
  EXPECT_LT(j_.At("reconciler:stop"), j_.At("election:released"));
  EXPECT_LT(j_.At("election:released"), j_.At("agent:stop"));
  EXPECT_GE(j_.At("cache:stop"), 0);
}

TEST_F(ManagerTest, NoElectionStartsLeaderRunnablesAfterTheRest) {
  Manager m(Options());
  m.Add(reconciler_);
  m.Add(agent_);
  std::stop_source stop;
  std::thread runner([&] { EXPECT_TRUE(m.Run(stop.get_token()).ok()); });
  ASSERT_TRUE(Eventually([&] { return j_.Has("reconciler:start") && j_.Has("agent:start"); }));
  EXPECT_TRUE(m.Leading());
  stop.request_stop();
  runner.join();
  EXPECT_TRUE(reconciler_.finished);
  EXPECT_TRUE(agent_.finished);
}

TEST_F(ManagerTest, CacheSyncTimeoutIsAnError) {
  ManagerOptions o = Options();
  o.cache_sync_timeout = milliseconds(50);
  Manager m(o, Logger(), &server_);
  m.AddCache(cache_, [] { return false; });
  m.Add(agent_);
  std::stop_source stop;
  Status s = m.Run(stop.get_token());
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_FALSE(j_.Has("agent:start"));
  EXPECT_TRUE(j_.Has("cache:stop"));  // what was started is stopped
}

TEST_F(ManagerTest, LosingTheLeaseEndsRunWithAnError) {
  Manager m(Options(), Logger(), nullptr, &election_);
  m.Add(reconciler_);
  m.Add(agent_);
  std::stop_source stop;
  Status result;
  std::thread runner([&] { result = m.Run(stop.get_token()); });
  election_.Grant();
  ASSERT_TRUE(Eventually([&] { return j_.Has("reconciler:start"); }));
  election_.Lose();
  runner.join();  // returns without any stop request
  EXPECT_EQ(result.code(), StatusCode::kAborted) << result;
  EXPECT_NE(result.message().find("leader election lost"), std::string::npos) << result;
  EXPECT_TRUE(reconciler_.finished);
  EXPECT_TRUE(agent_.finished);
  EXPECT_FALSE(m.Leading());
}

TEST_F(ManagerTest, RunnableFailureEndsRunAndFailsHealthz) {
  agent_.fail_with = InternalError("cannot open /dev/kmsg");
  Manager m(Options(), Logger(), &server_);
  m.Add(agent_);
  m.Add(reconciler_);
  std::stop_source stop;
  Status s = m.Run(stop.get_token());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("agent"), std::string::npos) << s;
  EXPECT_EQ(server_.Handle("/healthz", "").status, 500);
}

TEST_F(ManagerTest, StuckRunnableIsReportedNotWaitedForever) {
  ManagerOptions o = Options();
  o.graceful_shutdown_timeout = milliseconds(100);
  auto stuck = std::make_unique<FakeRunnable>("stuck", j_, false);
  stuck->ignore_stop_for = milliseconds(500);
  Manager m(o);
  m.Add(*stuck);
  std::stop_source stop;
  std::thread runner([&] {
    Status s = m.Run(stop.get_token());
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(s.message().find("stuck"), std::string::npos);
  });
  ASSERT_TRUE(Eventually([&] { return j_.Has("stuck:start"); }));
  stop.request_stop();
  runner.join();
  // Let the detached straggler finish before it and the journal go away.
  ASSERT_TRUE(Eventually([&] { return stuck->finished.load(); }));
  std::this_thread::sleep_for(milliseconds(20));
}

TEST(StartStopRunnable, CallsStartAndStop) {
  std::atomic<int> started{0}, stopped{0};
  StartStopRunnable r(
      "informer", [&] { ++started; }, [&] { ++stopped; }, false);
  std::stop_source stop;
  std::thread t([&] { EXPECT_TRUE(r.Run(stop.get_token()).ok()); });
  ASSERT_TRUE(Eventually([&] { return started == 1; }));
  EXPECT_EQ(stopped, 0);
  stop.request_stop();
  t.join();
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(r.NeedsLeaderElection());
}

}  // namespace
}  // namespace gg::runtime
