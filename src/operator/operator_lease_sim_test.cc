// The operator's defaults on the paths a user takes first: started by hand (no leader election
// unless asked for) it acts at once; asked to elect a leader in a namespace that does not exist
// it is not ready and says why on /readyz, then campaigns as soon as the namespace appears.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "common/clock.h"
#include "k8s/resource.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& f, std::chrono::milliseconds timeout = 20s) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

class OperatorDefaultsSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimOptions o;
    o.bookmark_interval = 200ms;
    auto s = sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    k8s::ClientConfig cfg;
    cfg.server = sim_->Url();
    auto c = k8s::RestClient::Create(cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    k8s::ResourceType crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                           "CustomResourceDefinition", false};
    ASSERT_TRUE(
        client_->Create(crds, "", sim::GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy").dump())
            .ok());
    ASSERT_TRUE(
        client_->Create(crds, "", sim::GuardianCrd("gpunodehealths", "GPUNodeHealth").dump()).ok());
    json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata", {{"name", "gpu-0"}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
        {"spec", json::object()}};
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", node).ok());
    json policy = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                   {"kind", "GPUHealthPolicy"},
                   {"metadata", {{"name", "default"}}},
                   {"spec", json::parse(R"({
                      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
                      "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1,
                                 "action": "Cordon"}],
                      "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000}
                    })")}};
    ASSERT_TRUE(sim_->Create("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", policy).ok())
        << "policy rejected";
  }
  void TearDown() override {
    stop_.request_stop();
    if (thread_.joinable()) thread_.join();
    op_.reset();
    client_.reset();  // its idle keep-alive connection would hold the server's Stop
    if (sim_) sim_->Stop();
  }

  void Start(OperatorConfig cfg) {
    cfg.metrics_addr = "127.0.0.1:0";
    cfg.identity = "op-a";
    cfg.lease_duration = 3s;
    cfg.renew_deadline = 2s;
    cfg.retry_period = 300ms;
    op_ = std::make_unique<Operator>(*client_, RealClock::Default(), registry_, cfg);
    thread_ = std::jthread([this] { result_ = op_->Run(stop_.get_token()); });
  }

  // /readyz?verbose of the running operator: {status, body}.
  std::pair<int, std::string> Readyz() {
    if (op_->HealthPort() <= 0) return {0, ""};
    httplib::Client c("127.0.0.1", op_->HealthPort());
    auto r = c.Get("/readyz?verbose");
    if (!r) return {0, ""};
    return {r->status, r->body};
  }

  void WriteXid79() {
    auto report = api::testing::HealthyReport("gpu-0", RealClock::Default().Now(), 8);
    api::testing::AddXid(report, 79, 0);
    json obj = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                {"kind", "GPUNodeHealth"},
                {"metadata", {{"name", "gpu-0"}}},
                {"status", json::parse(api::EncodeGpuNodeHealthStatus(report))}};
    ASSERT_TRUE(sim_->Insert(obj).ok());
  }

  bool Cordoned() {
    auto n = sim_->Get("/api/v1/nodes/gpu-0");
    return n.ok() && (*n)["spec"].value("unschedulable", false);
  }

  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> client_;
  metrics::Registry registry_;
  std::unique_ptr<Operator> op_;
  std::stop_source stop_;
  std::jthread thread_;
  Status result_;
};

TEST_F(OperatorDefaultsSimTest, DefaultConfigActsAtOnceWithoutALease) {
  OperatorConfig defaults;
  EXPECT_FALSE(defaults.leader_elect);
  Start(defaults);
  WriteXid79();
  ASSERT_TRUE(WaitFor([&] { return Cordoned(); })) << "a single operator with default flags "
                                                      "never acted";
  EXPECT_TRUE(op_->IsLeader());
  auto leases = client_->List(k8s::kLeases, "");
  ASSERT_TRUE(leases.ok()) << leases.status();
  for (const auto& l : json::parse(*leases)["items"]) {  // node leases are the kubelet's
    EXPECT_NE(l["metadata"].value("name", ""), "gpu-guardian-operator") << l.dump();
  }
  EXPECT_EQ(Readyz().first, 200);
}

TEST_F(OperatorDefaultsSimTest, MissingLeaseNamespaceIsNotReadyWithTheReasonThenRecovers) {
  OperatorConfig cfg;
  cfg.leader_elect = true;
  cfg.leader_election_namespace = "guardian-nowhere";
  Start(cfg);
  // Caches sync, but the Lease cannot be written: not ready, and the body says why and how.
  ASSERT_TRUE(WaitFor([&] {
    auto [code, body] = Readyz();
    return code == 500 && body.find("[-]leader-election") != std::string::npos;
  })) << Readyz().second;
  auto [code, body] = Readyz();
  EXPECT_NE(body.find("namespace \"guardian-nowhere\" does not exist"), std::string::npos) << body;
  EXPECT_NE(body.find("--leader-election-namespace"), std::string::npos) << body;
  EXPECT_NE(body.find("[+]informers-synced"), std::string::npos) << body;
  WriteXid79();
  std::this_thread::sleep_for(1s);
  EXPECT_FALSE(op_->IsLeader());
  EXPECT_FALSE(Cordoned()) << "acted without holding the lease";

  // The namespace appears: the operator campaigns, leads, turns ready and acts.
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces", {{"apiVersion", "v1"},
                                                  {"kind", "Namespace"},
                                                  {"metadata", {{"name", "guardian-nowhere"}}}})
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return op_->IsLeader(); }));
  EXPECT_TRUE(WaitFor([&] { return Readyz().first == 200; })) << Readyz().second;
  EXPECT_TRUE(WaitFor([&] { return Cordoned(); }));
  auto lease = sim_->Get(
      "/apis/coordination.k8s.io/v1/namespaces/guardian-nowhere/leases/"
      "gpu-guardian-operator");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"].value("holderIdentity", ""), "op-a");
}

TEST_F(OperatorDefaultsSimTest, LeaderElectionWithoutANamespaceDoesNotStart) {
  OperatorConfig cfg;
  cfg.leader_elect = true;
  {
    Operator op(*client_, RealClock::Default(), registry_, cfg);
    std::stop_source stop;
    Status s = op.Run(stop.get_token());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  }
}

TEST(DefaultLeaseNamespace, PodNamespaceFileThenEnvThenAnErrorNamingTheFlag) {
  std::map<std::string, std::string> files, env;
  k8s::ConfigEnv fake;
  fake.getenv = [&](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  fake.read_file = [&](const std::string& p) -> StatusOr<std::string> {
    auto it = files.find(p);
    if (it == files.end()) return NotFoundError(p);
    return it->second;
  };
  fake.file_exists = [&](const std::string& p) { return files.count(p) > 0; };

  auto none = DefaultLeaseNamespace(fake, "/sa");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--leader-election-namespace"), std::string::npos);
  env["POD_NAMESPACE"] = "from-env";
  EXPECT_EQ(DefaultLeaseNamespace(fake, "/sa").value_or(""), "from-env");
  files["/sa/namespace"] = "gpu-guardian\n";
  EXPECT_EQ(DefaultLeaseNamespace(fake, "/sa").value_or(""), "gpu-guardian");
  files["/sa/namespace"] = "  ";  // an empty file is no answer
  EXPECT_EQ(DefaultLeaseNamespace(fake, "/sa").value_or(""), "from-env");
}

}  // namespace
}  // namespace gg::op
