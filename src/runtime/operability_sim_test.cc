// What the runtime tells an operator, against the simulator: a standby says who
// leads once and again when that changes, with leader_election_master_status following; an
// informer for a CRD that is not installed logs one error naming the CRD and the command that
// installs it, not a line per retry.
#include <gtest/gtest.h>

#include <iostream>
#include <mutex>
#include <thread>

#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "runtime/informer.h"
#include "runtime/leader_election.h"
#include "sim/server.h"

namespace gg::runtime {
namespace {

using namespace std::chrono_literals;

class CaptureSink : public LogSink {
 public:
  void Write(std::string_view line) override {
    std::scoped_lock lock(mu);
    lines.emplace_back(line);
  }
  std::vector<std::string> Matching(std::string_view a, std::string_view b = "") {
    std::scoped_lock lock(mu);
    std::vector<std::string> out;
    for (const auto& l : lines)
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) out.push_back(l);
    return out;
  }
  std::string All() {
    std::scoped_lock lock(mu);
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

template <typename Pred>
bool WaitFor(Pred p, std::chrono::seconds limit = 20s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!p()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Runtime components log through the process-wide sink; capture it for one test.
class OperabilitySimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Logger::SetGlobalSink(sink_);
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
  void TearDown() override {
    struct Stderr : LogSink {
      void Write(std::string_view line) override { std::cerr << line << "\n"; }
    };
    Logger::SetGlobalSink(std::make_shared<Stderr>());
  }

  std::shared_ptr<CaptureSink> sink_ = std::make_shared<CaptureSink>();
  std::unique_ptr<gg::sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> client_;
};

LeaderElectionConfig Config(const std::string& id) {
  LeaderElectionConfig c;
  c.lease_namespace = "default";
  c.lease_name = "ops-lease";
  c.identity = id;
  c.lease_duration = 3s;
  c.renew_deadline = 2s;
  c.retry_period = 200ms;
  return c;
}

TEST_F(OperabilitySimTest, StandbySaysWhoLeadsOnceAndOnChange) {
  auto a = LeaderElector::Create(*client_, RealClock::Default(), Config("replica-a"));
  ASSERT_TRUE(a.ok());
  (*a)->Start();
  ASSERT_TRUE(WaitFor([&] { return (*a)->IsLeader(); }));
  auto b = LeaderElector::Create(*client_, RealClock::Default(), Config("replica-b"));
  ASSERT_TRUE(b.ok());
  (*b)->Start();
  ASSERT_TRUE(WaitFor([&] { return !sink_->Matching("standing by", "leader=replica-a").empty(); }))
      << sink_->All();
  std::this_thread::sleep_for(1s);  // five retry periods: still one line
  EXPECT_EQ(sink_->Matching("standing by").size(), 1u) << sink_->All();
  EXPECT_EQ(metrics::DefaultRegistry().Value("leader_election_master_status", {"ops-lease"}), 1);

  (*a)->Stop();  // clean release: b takes over and says so
  ASSERT_TRUE(WaitFor([&] { return (*b)->IsLeader(); }));
  EXPECT_FALSE(sink_->Matching("became leader", "identity=replica-b").empty()) << sink_->All();
  EXPECT_FALSE(sink_->Matching("stopped leading", "identity=replica-a").empty()) << sink_->All();
  (*b)->Stop();
  EXPECT_EQ(metrics::DefaultRegistry().Value("leader_election_master_status", {"ops-lease"}), 0);
}

TEST_F(OperabilitySimTest, MissingCrdIsOneErrorWithTheFixNotARetryStorm) {
  InformerOptions o;
  o.backoff_initial = 10ms;
  o.backoff_max = 20ms;  // ~50 retries a second
  // The list fails before anything is decoded, so any projection will do.
  Informer<k8s::Node> informer(*client_, k8s::kGpuNodeHealths, RealClock::Default(), o);
  informer.Start();
  ASSERT_TRUE(WaitFor([&] { return informer.stats().errors.load() >= 20; })) << sink_->All();
  informer.Stop();
  auto lines = sink_->Matching("gpunodehealths");
  ASSERT_EQ(lines.size(), 1u) << sink_->All();
  EXPECT_NE(
      lines[0].find("CustomResourceDefinition gpunodehealths.gpuguardian.io is not installed"),
      std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("kubectl apply -f deploy/crds/"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("error"), std::string::npos) << lines[0];
  EXPECT_FALSE(informer.HasSynced());
}

}  // namespace
}  // namespace gg::runtime
