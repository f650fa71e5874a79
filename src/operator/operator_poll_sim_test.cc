// The operator in polling mode (OperatorConfig::poll_interval, `--mode poll`) against the
// in-process simulator: it fences a node from a report it learned of through a periodic LIST,
// without ever opening a WATCH. World state only: the Node's taint and cordon, and the
// simulator's request counters.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;


json Report(const std::string& node, bool xid) {
  api::GpuNodeHealthStatus s;
  s.node_name = node;
  s.agent_version = "test";
  s.observed_at = s.heartbeat_time = std::chrono::system_clock::now();
  s.expected_gpus = 1;
  api::GpuStatus g;
  g.index = 0;
  g.uuid = "GPU-" + node;
  s.gpus.push_back(g);
  s.sources.push_back({"nvml", api::SourceState::kOk, ""});
  if (xid) {
    api::XidEvent e;
    e.xid = 79;
    e.gpu_uuid = g.uuid;
    e.count = 1;
    e.first_seen = e.last_seen = s.observed_at;
    s.xids.push_back(e);
  }
  return json::parse(api::EncodeGpuNodeHealthStatus(s));
}

bool Fenced(sim::SimServer& srv, const std::string& node) {
  auto n = srv.Get("/api/v1/nodes/" + node);
  if (!n.ok()) return false;
  bool tainted = false;
  for (const auto& t : (*n)["spec"].value("taints", json::array()))
    tainted = tainted || t.value("key", "") == api::kTaintKey;
  return tainted && (*n)["spec"].value("unschedulable", false);
}

// Requests the simulator counted for `verb` (all resources, all codes).
double Requests(sim::SimServer& srv, const std::string& verb) {
  httplib::Client c(srv.Url());
  auto r = c.Get("/metrics");
  if (!r) return -1;
  double sum = 0;
  std::string needle = "apiserver_request_total{verb=\"" + verb + "\"";
  std::size_t pos = 0;
  while ((pos = r->body.find(needle, pos)) != std::string::npos) {
    auto eol = r->body.find('\n', pos);
    auto sp = r->body.rfind(' ', eol);
    sum += std::atof(r->body.substr(sp + 1, eol - sp - 1).c_str());
    pos = eol;
  }
  return sum;
}

TEST(OperatorPollTest, FencesFromAReportWithoutEverWatching) {
  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  auto s = sim::SimServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  sim::SimServer& srv = **s;
  const char* crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  ASSERT_TRUE(srv.Create(crds, sim::GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy")).ok());
  ASSERT_TRUE(srv.Create(crds, sim::GuardianCrd("gpunodehealths", "GPUNodeHealth")).ok());
  for (const std::string n : {"gpu-a", "gpu-b"}) {
    json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", n}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
                 {"spec", json::object()},
                 {"status",
                  {{"capacity", {{"nvidia.com/gpu", "1"}}},
                   {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(srv.Create("/api/v1/nodes", node).ok());
    ASSERT_TRUE(srv.Create("/apis/gpuguardian.io/v1alpha1/gpunodehealths",
                           {{"apiVersion", "gpuguardian.io/v1alpha1"},
                            {"kind", "GPUNodeHealth"},
                            {"metadata", {{"name", n}}},
                            {"status", Report(n, false)}})
                    .ok());
  }
  json policy = {{"apiVersion", "gpuguardian.io/v1alpha1"},
                 {"kind", "GPUHealthPolicy"},
                 {"metadata", {{"name", "p"}}},
                 {"spec", json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Cordon"}],
      "safety": {"maxUnhealthy": "100%"}})")}};
  ASSERT_TRUE(srv.Create("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", policy).ok());

  k8s::ClientConfig cfg;
  cfg.server = srv.Url();
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  ASSERT_TRUE(client.ok());
  metrics::Registry registry;
  OperatorConfig oc;
  oc.metrics_addr = "127.0.0.1:0";
  oc.leader_elect = false;
  oc.identity = "poll-test";
  // Long enough that "not before the next poll" is observable on a loaded machine, short
  // enough for the test to stay in seconds.
  oc.poll_interval = 3s;
  Operator op(**client, RealClock::Default(), registry, oc);
  std::stop_source stop;
  std::jthread t([&] { (void)op.Run(stop.get_token()); });
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!op.Synced() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(op.Synced());
  const double lists_after_sync = Requests(srv, "list");

  ASSERT_TRUE(srv.MergePatch("/apis/gpuguardian.io/v1alpha1/gpunodehealths/gpu-a",
                             {{"status", Report("gpu-a", true)}})
                  .ok());
  deadline = std::chrono::steady_clock::now() + 60s;
  while (!Fenced(srv, "gpu-a") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(Fenced(srv, "gpu-a"));
  EXPECT_FALSE(Fenced(srv, "gpu-b"));
  // It learned of the report from a periodic LIST, never from a watch.
  EXPECT_GT(Requests(srv, "list"), lists_after_sync);
  EXPECT_EQ(Requests(srv, "watch"), 0);
  stop.request_stop();
  t.join();
  srv.Stop();
}

}  // namespace
}  // namespace gg::op
