// Leader election against the simulator: one leader at a time, fast hand-over on release,
// a taken-over lease ends leadership (lost → process exits non-zero).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "k8s/codec.h"
#include "k8s/rest_client.h"
#include "runtime/leader_election.h"
#include "sim/server.h"

namespace gg::runtime {
namespace {

template <typename Pred>
bool WaitFor(Pred p, std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!p()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class LeaderElectionSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gg::sim::SimOptions o;
    o.kubelet = o.scheduler = o.controllers = false;
    auto s = gg::sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    k8s::ClientConfig cfg;
    cfg.server = sim_->Url();
    auto c = k8s::RestClient::Create(cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  LeaderElectionConfig Config(const std::string& id) {
    LeaderElectionConfig c;
    c.lease_namespace = "default";
    c.lease_name = "gpu-guardian-operator";
    c.identity = id;
    c.lease_duration = std::chrono::seconds(3);
    c.renew_deadline = std::chrono::seconds(2);
    c.retry_period = std::chrono::milliseconds(200);
    return c;
  }
  StatusOr<k8s::Lease> ReadLease() {
    auto body = client_->Get(k8s::kLeases, "default", "gpu-guardian-operator");
    if (!body.ok()) return body.status();
    return k8s::ParseObject<k8s::Lease>(*body);
  }
  std::unique_ptr<gg::sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> client_;
};

TEST_F(LeaderElectionSimTest, OneLeaderAndFastHandOverOnRelease) {
  std::atomic<int> a_started{0}, a_stopped{0}, b_started{0};
  auto ca = Config("replica-a");
  ca.on_started_leading = [&] { ++a_started; };
  ca.on_stopped_leading = [&] { ++a_stopped; };
  auto cb = Config("replica-b");
  cb.on_started_leading = [&] { ++b_started; };
  auto a = LeaderElector::Create(*client_, RealClock::Default(), ca);
  auto b = LeaderElector::Create(*client_, RealClock::Default(), cb);
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->Start();
  ASSERT_TRUE(WaitFor([&] { return (*a)->IsLeader(); }));
  (*b)->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_FALSE((*b)->IsLeader());
  EXPECT_EQ((*b)->CurrentLeader(), "replica-a");
  auto lease = ReadLease();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->holder_identity, "replica-a");
  EXPECT_EQ(lease->lease_duration_seconds.value_or(0), 3);

  auto released_at = std::chrono::steady_clock::now();
  (*a)->Stop();
  EXPECT_FALSE((*a)->IsLeader());
  EXPECT_FALSE((*a)->lost());
  EXPECT_EQ(a_stopped.load(), 1);
  ASSERT_TRUE(WaitFor([&] { return (*b)->IsLeader(); }));
  // Well under the 3 s lease duration: the release handed it over.
  EXPECT_LT(std::chrono::steady_clock::now() - released_at, std::chrono::milliseconds(1500));
  EXPECT_EQ(b_started.load(), 1);
  lease = ReadLease();
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->holder_identity, "replica-b");
  EXPECT_EQ(lease->lease_transitions, 1);
  (*b)->Stop();
  lease = ReadLease();
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->holder_identity, "");
}

// The follower watches the Lease: with a 10 s retry period it still takes over within a
// second or so of the release instead of at its next poll (10-22 s later). With watch_lease off it
// only polls.
TEST_F(LeaderElectionSimTest, FollowerWatchingTheLeaseTakesOverAtOnceOnRelease) {
  auto slow = [&](const std::string& id, bool watch) {
    auto c = Config(id);
    c.lease_duration = std::chrono::seconds(60);
    c.renew_deadline = std::chrono::seconds(30);
    c.retry_period = std::chrono::seconds(10);
    c.watch_lease = watch;
    return c;
  };
  auto a = LeaderElector::Create(*client_, RealClock::Default(), slow("replica-a", true));
  auto b = LeaderElector::Create(*client_, RealClock::Default(), slow("replica-b", true));
  auto c = LeaderElector::Create(*client_, RealClock::Default(), slow("replica-c", false));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  (*a)->Start();
  ASSERT_TRUE(WaitFor([&] { return (*a)->IsLeader(); }));
  (*b)->Start();
  (*c)->Start();
  ASSERT_TRUE(WaitFor([&] {
    return (*b)->CurrentLeader() == "replica-a" && (*c)->CurrentLeader() == "replica-a";
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // b's watch is open
  auto released_at = std::chrono::steady_clock::now();
  (*a)->Stop();
  ASSERT_TRUE(WaitFor([&] { return (*b)->IsLeader(); }, std::chrono::seconds(9)))
      << "the follower waited for its poll";
  // Typically milliseconds; the bound leaves room for a loaded CI machine and still is far
  // below the 10 s poll.
  EXPECT_LT(std::chrono::steady_clock::now() - released_at, std::chrono::seconds(3));
  EXPECT_FALSE((*c)->IsLeader());
  (*b)->Stop();
  (*c)->Stop();
}

// The release meets a 429 (Retry-After 30 s): it is tried again at once instead of leaving the
// follower to wait out the lease duration.
TEST_F(LeaderElectionSimTest, ReleaseRefusedOnceIsRetried) {
  auto slow = [&](const std::string& id) {
    auto c = Config(id);
    c.lease_duration = std::chrono::seconds(60);
    c.renew_deadline = std::chrono::seconds(30);
    c.retry_period = std::chrono::seconds(10);
    return c;
  };
  auto a = LeaderElector::Create(*client_, RealClock::Default(), slow("replica-a"));
  auto b = LeaderElector::Create(*client_, RealClock::Default(), slow("replica-b"));
  ASSERT_TRUE(a.ok() && b.ok());
  (*a)->Start();
  ASSERT_TRUE(WaitFor([&] { return (*a)->IsLeader(); }));
  (*b)->Start();
  ASSERT_TRUE(WaitFor([&] { return (*b)->CurrentLeader() == "replica-a"; }));
  sim::FaultConfig f;
  f.rules.push_back({"update", "leases", 1.0, 429, 30, std::chrono::milliseconds(0), 1});
  sim_->SetFaults(f);
  (*a)->Stop();
  ASSERT_TRUE(WaitFor([&] { return (*b)->IsLeader(); }, std::chrono::seconds(9)))
      << "the release was not retried";
  (*b)->Stop();
}

TEST_F(LeaderElectionSimTest, TakenLeaseMeansLost) {
  std::atomic<int> stopped{0};
  auto ca = Config("replica-a");
  ca.on_stopped_leading = [&] { ++stopped; };
  auto a = LeaderElector::Create(*client_, RealClock::Default(), ca);
  ASSERT_TRUE(a.ok());
  (*a)->Start();
  ASSERT_TRUE(WaitFor([&] { return (*a)->IsLeader(); }));
  // Someone else writes the lease (e.g. a replica after a network partition).
  auto cur =
      sim_->Get("/apis/coordination.k8s.io/v1/namespaces/default/leases/gpu-guardian-operator");
  ASSERT_TRUE(cur.ok()) << cur.status();
  nlohmann::json obj = *cur;
  obj["spec"]["holderIdentity"] = "intruder";
  obj["spec"]["leaseDurationSeconds"] = 30;
  obj["metadata"].erase("resourceVersion");
  ASSERT_TRUE(
      sim_->Update("/apis/coordination.k8s.io/v1/namespaces/default/leases/gpu-guardian-operator",
                   obj)
          .ok());
  ASSERT_TRUE(WaitFor([&] { return (*a)->lost(); }));
  EXPECT_FALSE((*a)->IsLeader());
  EXPECT_EQ(stopped.load(), 1);
  (*a)->Stop();
  auto lease = ReadLease();
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->holder_identity, "intruder");  // a lost lease is not "released"
}

TEST(LeaderElectionConfigTest, Validation) {
  LeaderElectionConfig c;
  c.lease_namespace = "ns";
  c.lease_name = "l";
  c.identity = "me";
  EXPECT_TRUE(ValidateLeaderElectionConfig(c).ok());
  c.renew_deadline = c.lease_duration;
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
  c.renew_deadline = std::chrono::seconds(10);
  c.retry_period = std::chrono::seconds(9);
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
  c.retry_period = std::chrono::seconds(2);
  c.identity.clear();
  EXPECT_FALSE(ValidateLeaderElectionConfig(c).ok());
}

}  // namespace
}  // namespace gg::runtime
