// The operator in polling mode (OperatorConfig::poll_interval, `--mode poll`) against the
// in-process simulator: it fences a node from a report it learned of through a periodic LIST,
// without ever opening a WATCH. World state only: the Node's taint and cordon, and the
// simulator's request counters.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "k8s/rest_client.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "operator/test_operator.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

json Report(const std::string& node, bool xid) { return OneGpuReport(node, xid); }

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
  auto s = sim::StartGuardianFleet({"gpu-a", "gpu-b"},
                                   [](const std::string& n) { return Report(n, false); });
  ASSERT_TRUE(s.ok()) << s.status();
  sim::SimServer& srv = **s;
  const json policy = XidCordonPolicy();
  ASSERT_TRUE(srv.Create("/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", policy).ok());

  auto client = SimClient(srv);
  ASSERT_TRUE(client.ok());
  metrics::Registry registry;
  OperatorConfig oc = SingleOperatorConfig("poll-test");
  // Long enough that "not before the next poll" is observable on a loaded machine, short
  // enough for the test to stay in seconds.
  oc.poll_interval = 3s;
  Operator op(**client, RealClock::Default(), registry, oc);
  std::stop_source stop;
  std::jthread t([&] { (void)op.Run(stop.get_token()); });
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!op.Synced() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
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
