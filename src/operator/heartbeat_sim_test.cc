// Freshness from heartbeats against the in-process simulator with the whole operator: a node
// whose agent only renews status.heartbeatTime (the agent's fallback heartbeat patch, no
// report) or only its per-node Lease (the agent's heartbeat) stays Healthy past the heartbeat
// budget, and a node whose agent went silent — or stopped renewing its Lease — turns Unknown.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "common/time_util.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "operator/test_operator.h"
#include "sim/server.h"
#include "sim/test_objects.h"
#include "sim/test_util.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kReports[] = "/apis/gpuguardian.io/v1alpha1/gpunodehealths/";

json HealthyReport(const std::string& node) { return OneGpuReport(node, false); }

// status of the node's GPUHealthy condition ("" when it has none yet).
std::string GpuHealthy(sim::SimServer& srv, const std::string& node) {
  auto n = srv.Get("/api/v1/nodes/" + node);
  if (!n.ok()) return "";
  for (const auto& c : (*n)["status"].value("conditions", json::array()))
    if (c.value("type", "") == api::kConditionType) return c.value("status", "");
  return "";
}

// An agent that patches nothing but its report's heartbeatTime, every 500 ms, until stopped.
std::jthread ReportHeartbeats(sim::SimServer& srv, const std::string& node) {
  return std::jthread([&srv, node](std::stop_token st) {
    while (!st.stop_requested()) {
      json hb = {
          {"status", {{"heartbeatTime", FormatRfc3339Micro(std::chrono::system_clock::now())}}}};
      (void)srv.MergePatch(std::string(kReports) + node, hb);
      std::this_thread::sleep_for(500ms);
    }
  });
}

TEST(HeartbeatSimTest, HeartbeatOnlyPatchesKeepANodeFreshASilentAgentTurnsItUnknown) {
  auto s = sim::StartGuardianFleet({"beating", "silent"}, HealthyReport);
  ASSERT_TRUE(s.ok()) << s.status();
  sim::SimServer& srv = **s;
  const json policy = XidCordonPolicy({{"unknown", {{"after", "3s"}}}});
  ASSERT_TRUE(srv.Create("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", policy).ok());

  auto client = SimClient(srv);
  ASSERT_TRUE(client.ok());
  metrics::Registry registry;
  OperatorConfig oc = SingleOperatorConfig("heartbeat-test");
  Operator op(**client, RealClock::Default(), registry, oc);
  std::stop_source stop;
  std::jthread run([&] { (void)op.Run(stop.get_token()); });
  // The agent of "beating": nothing but heartbeatTime, every 500 ms.
  std::jthread agent = ReportHeartbeats(srv, "beating");
  ASSERT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "beating") == "True"; }, 30s));
  ASSERT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "silent") == "Unknown"; }, 30s))
      << GpuHealthy(srv, "silent");
  // Well past the budget since the report itself was written: still fresh, still Healthy.
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(GpuHealthy(srv, "beating"), "True");
  auto beating = srv.Get(std::string(kReports) + "beating");
  ASSERT_TRUE(beating.ok());
  EXPECT_EQ((*beating)["status"]["gpus"].size(), 1u) << "the heartbeat kept the report";
  agent.request_stop();
  agent.join();
  stop.request_stop();
  run.join();
  srv.Stop();
}

constexpr char kLeases[] = "/apis/coordination.k8s.io/v1/namespaces/gpu-guardian/leases";

// The agent's heartbeat Lease of `node`, renewed now.
json AgentLease(const std::string& node) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", "gpu-guardian-agent-" + node},
            {"namespace", "gpu-guardian"},
            {"labels", {{"gpuguardian.io/agent-lease", "true"}}}}},
          {"spec",
           {{"holderIdentity", node},
            {"leaseDurationSeconds", 2},
            {"renewTime", FormatRfc3339Micro(std::chrono::system_clock::now())}}}};
}

// Reports written once at the start; "leased" has an agent renewing only its Lease, "silent"
// none. The Lease keeps "leased" Healthy well past the 3 s budget with its report untouched;
// once the renewals stop it turns Unknown like a silent agent's node; renewals again bring it
// back.
TEST(HeartbeatSimTest, LeaseRenewalsKeepANodeFreshStoppedRenewalsTurnItUnknown) {
  auto s = sim::StartGuardianFleet({"leased", "silent"}, HealthyReport);
  ASSERT_TRUE(s.ok()) << s.status();
  sim::SimServer& srv = **s;
  ASSERT_TRUE(srv.Create("/api/v1/namespaces", {{"metadata", {{"name", "gpu-guardian"}}}}).ok());
  const json policy = XidCordonPolicy({{"unknown", {{"after", "3s"}}}});
  ASSERT_TRUE(srv.Create("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", policy).ok());
  // Another holder's Lease under the silent node's name counts for nothing.
  json forged = AgentLease("silent");
  forged["spec"]["holderIdentity"] = "leased";
  ASSERT_TRUE(srv.Create(kLeases, forged).ok());

  auto client = SimClient(srv);
  ASSERT_TRUE(client.ok());
  metrics::Registry registry;
  OperatorConfig oc = SingleOperatorConfig("lease-test");
  oc.agent_lease_namespace = "gpu-guardian";
  Operator op(**client, RealClock::Default(), registry, oc);
  std::stop_source stop;
  std::jthread run([&] { (void)op.Run(stop.get_token()); });
  std::atomic<bool> renewing{true};
  std::jthread agent([&](std::stop_token st) {
    const std::string path = std::string(kLeases) + "/gpu-guardian-agent-leased";
    while (!st.stop_requested()) {
      if (renewing.load() && !srv.Update(path, AgentLease("leased")).ok())
        (void)srv.Create(kLeases, AgentLease("leased"));
      std::this_thread::sleep_for(500ms);
    }
  });
  ASSERT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "leased") == "True"; }, 30s));
  ASSERT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "silent") == "Unknown"; }, 30s))
      << GpuHealthy(srv, "silent");
  const auto report_rv =
      (*srv.Get(std::string(kReports) + "leased"))["metadata"]["resourceVersion"];
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(GpuHealthy(srv, "leased"), "True");
  EXPECT_EQ((*srv.Get(std::string(kReports) + "leased"))["metadata"]["resourceVersion"], report_rv)
      << "fresh through the Lease alone";
  renewing = false;
  EXPECT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "leased") == "Unknown"; }, 30s))
      << GpuHealthy(srv, "leased");
  renewing = true;
  EXPECT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "leased") == "True"; }, 30s))
      << GpuHealthy(srv, "leased");
  agent.request_stop();
  agent.join();
  stop.request_stop();
  run.join();
  srv.Stop();
}

// An operator whose RBAC predates the agents' Leases (no list or watch on leases) still
// becomes ready and takes freshness from the reports alone, which the agents then renew
// through their fallback heartbeat patch.
TEST(HeartbeatSimTest, WithoutLeaseRbacTheOperatorRunsOnReportsAlone) {
  std::ifstream in(std::string(GG_SOURCE_DIR) + "/deploy/rbac/operator.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string rbac = ss.str();
  const std::string verbs = "verbs: [get, create, update, list, watch]";
  ASSERT_NE(rbac.find(verbs), std::string::npos) << "the shipped lease grant moved";
  rbac.replace(rbac.find(verbs), verbs.size(), "verbs: [get, create, update, watch]");
  const std::string file = std::filesystem::temp_directory_path() /
                           ("gg-old-rbac-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << rbac;
  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  o.authz = "rbac";
  o.rbac_files = {file};
  o.token_users = {{"op-token", "system:serviceaccount:gpu-guardian:gpu-guardian-operator"}};
  auto s = sim::SimServer::Start(o);
  std::filesystem::remove(file);
  ASSERT_TRUE(s.ok()) << s.status();
  sim::SimServer& srv = **s;
  const char* crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  ASSERT_TRUE(srv.Create(crds, sim::GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy")).ok());
  ASSERT_TRUE(srv.Create(crds, sim::GuardianCrd("gpunodehealths", "GPUNodeHealth")).ok());
  ASSERT_TRUE(srv.Create("/api/v1/nodes", sim::ReadyGpuNode("beating")).ok());
  ASSERT_TRUE(sim::PutReportStatus(srv, "beating", HealthyReport("beating")).ok());
  ASSERT_TRUE(srv.Create("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies",
                         XidCordonPolicy({{"unknown", {{"after", "3s"}}}}))
                  .ok());
  k8s::ClientConfig cfg;
  cfg.server = srv.Url();
  cfg.token = "op-token";
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  ASSERT_TRUE(client.ok());
  metrics::Registry registry;
  Operator op(**client, RealClock::Default(), registry, SingleOperatorConfig("old-rbac"));
  std::stop_source stop;
  std::jthread run([&] { (void)op.Run(stop.get_token()); });
  std::jthread agent = ReportHeartbeats(srv, "beating");
  EXPECT_TRUE(sim::WaitFor([&] { return op.Synced(); }, 30s)) << "never ready";
  ASSERT_TRUE(sim::WaitFor([&] { return GpuHealthy(srv, "beating") == "True"; }, 30s))
      << GpuHealthy(srv, "beating");
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(GpuHealthy(srv, "beating"), "True");
  agent.request_stop();
  agent.join();
  stop.request_stop();
  run.join();
  srv.Stop();
}

}  // namespace
}  // namespace gg::op
