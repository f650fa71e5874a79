// No secrets in logs: the whole operator (debug level), the simulator's request log and
// clients refused with 401/403 write many lines; none may contain a bearer token. The operator
// authenticates with a token file under the shipped RBAC (deploy/rbac), as in a cluster.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "api/gpu_node_health.h"
#include "common/log.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/rbac.h"
#include "sim/server.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Keeps every line; still prints them, so a failing test shows its log.
class CapturingSink final : public LogSink {
 public:
  void Write(std::string_view line) override {
    std::scoped_lock lock(mu_);
    lines_.emplace_back(line);
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  }
  std::vector<std::string> Lines() {
    std::scoped_lock lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr char kOperatorToken[] = "op-7f3a9c1e5b2d4e6f8a0b1c2d3e4f5a6b";
constexpr char kAgentToken[] = "agent-0a1b2c3d4e5f60718293a4b5c6d7e8f9";
constexpr char kStolenToken[] = "stolen-ffeeddccbbaa99887766554433221100";

TEST(NoSecretsInLogs, TokensNeverAppearInAnyLogLine) {
  auto sink = std::make_shared<CapturingSink>();
  Logger::SetGlobalSink(sink);
  Logger::SetGlobalLevel(LogLevel::kDebug);

  const std::string src = GG_SOURCE_DIR;
  sim::SimOptions o;
  o.bookmark_interval = 200ms;
  o.time_scale = 30;
  o.log_requests = true;
  o.authz = "rbac";
  o.rbac_files = {src + "/deploy/rbac/operator.yaml", src + "/deploy/rbac/agent.yaml"};
  o.token_users = {{kOperatorToken, "system:serviceaccount:gpu-guardian:gpu-guardian-operator"},
                   {kAgentToken, "system:serviceaccount:gpu-guardian:gpu-guardian-agent"}};
  auto started = sim::SimServer::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  auto& sim = **started;
  for (const char* f :
       {"/deploy/namespace.yaml", "/deploy/crds/gpuhealthpolicies.yaml",
        "/deploy/crds/gpunodehealths.yaml", "/deploy/samples/default-policy.yaml"}) {
    auto docs = sim::ParseYamlDocuments(ReadFile(src + f));
    ASSERT_TRUE(docs.ok()) << f << ": " << docs.status();
    for (const auto& d : *docs) {
      if (d.is_object()) {
        ASSERT_TRUE(sim.Insert(d).ok()) << f;
      }
    }
  }
  ASSERT_TRUE(sim.Insert({{"apiVersion", "v1"},
                          {"kind", "Node"},
                          {"metadata",
                           {{"name", "gpu-0"}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
                          {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}}}})
                  .ok());
  api::GpuNodeHealthStatus report;
  report.node_name = "gpu-0";
  report.observed_at = report.heartbeat_time = RealClock::Default().Now();
  report.gpus.push_back(api::GpuStatus{});
  report.gpus[0].uuid = "GPU-0";
  api::XidEvent xid;
  xid.xid = 79;
  xid.gpu_uuid = "GPU-0";
  xid.count = 1;
  xid.first_seen = xid.last_seen = report.observed_at;
  xid.recommended_action = "RESTART_BM";
  report.xids.push_back(xid);
  ASSERT_TRUE(sim.Insert({{"apiVersion", "gpuguardian.io/v1alpha1"},
                          {"kind", "GPUNodeHealth"},
                          {"metadata", {{"name", "gpu-0"}}},
                          {"status", json::parse(api::EncodeGpuNodeHealthStatus(report))}})
                  .ok());

  // The operator reads its token from a file, as from the projected service-account volume.
  std::string token_file =
      std::filesystem::temp_directory_path() / ("gg-op-token-" + std::to_string(::getpid()));
  std::ofstream(token_file) << kOperatorToken << "\n";
  k8s::ClientConfig cfg;
  cfg.server = sim.Url();
  cfg.token_file = token_file;
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  ASSERT_TRUE(client.ok());
  metrics::Registry registry;
  OperatorConfig oc;
  oc.metrics_addr = "127.0.0.1:0";
  oc.identity = "op-a";
  oc.leader_elect = true;
  oc.leader_election_namespace = "gpu-guardian";
  oc.lease_duration = 3s;
  oc.renew_deadline = 2s;
  oc.retry_period = 300ms;
  oc.event_retry_sleep = 100ms;
  Operator op(**client, RealClock::Default(), registry, oc);
  std::stop_source stop;
  std::jthread run([&] { (void)op.Run(stop.get_token()); });

  // Clients the server refuses: an unknown (stolen) token and the agent asking for more
  // than its role allows. Their errors are logged by whoever handles them.
  for (auto [token, what] : {std::pair{kStolenToken, "401"}, std::pair{kAgentToken, "403"}}) {
    k8s::ClientConfig bad;
    bad.server = sim.Url();
    bad.token = token;
    auto c = k8s::RestClient::Create(bad, RealClock::Default());
    ASSERT_TRUE(c.ok());
    auto r = (*c)->List(k8s::kPods, "");
    EXPECT_FALSE(r.ok()) << what;
    Logger().WithName("test-client").Error("request refused", {{"status", r.status().ToString()}});
  }

  // The operator did real work under that token (a fenced node, an Event, a Lease).
  bool fenced = false;
  for (auto end = std::chrono::steady_clock::now() + 60s;
       !fenced && std::chrono::steady_clock::now() < end;) {
    auto n = sim.Get("/api/v1/nodes/gpu-0");
    fenced = n.ok() && n->value("/spec/unschedulable"_json_pointer, false);
    if (!fenced) std::this_thread::sleep_for(100ms);
  }
  stop.request_stop();
  run.join();
  sim.Stop();
  Logger::SetGlobalLevel(LogLevel::kInfo);
  std::filesystem::remove(token_file);
  EXPECT_TRUE(fenced) << "the operator never acted: the log proves little";

  auto lines = sink->Lines();
  EXPECT_GT(lines.size(), 20u) << "too few lines to prove anything";
  int request_lines = 0;
  for (const auto& l : lines) {
    if (l.find("request") != std::string::npos) ++request_lines;
    for (const char* secret : {kOperatorToken, kAgentToken, kStolenToken}) {
      EXPECT_EQ(l.find(secret), std::string::npos) << "secret in log line: " << l;
      // Not even a recognizable part of it (e.g. a truncated header value).
      EXPECT_EQ(l.find(std::string(secret).substr(0, 20)), std::string::npos) << l;
    }
  }
  EXPECT_GT(request_lines, 0) << "the simulator's request log was not captured";
}

}  // namespace
}  // namespace gg::op
