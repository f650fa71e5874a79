// PdbBudgets (the drainer's view of PodDisruptionBudgets) against the in-process simulator:
// which budgets cover a pod, that a budget coming to allow a disruption wakes subscribers, and
// that a deleted budget no longer covers anything. The simulator's controllers are off so the
// test alone writes the budgets' status.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "k8s/rest_client.h"
#include "operator/drain_runner.h"
#include "sim/server.h"
#include "sim/test_util.h"

namespace gg::op {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kPdbs[] = "/apis/policy/v1/namespaces/ml/poddisruptionbudgets";

k8s::Pod PodWith(const std::string& ns, const std::string& app) {
  k8s::Pod p;
  p.meta.namespace_ = ns;
  p.meta.name = app + "-0";
  p.meta.labels.Set("app", app);
  return p;
}

// The one budget covering `pod` (allowed, version), or (-1, 0) when none or not synced.
std::pair<int, std::uint64_t> Cover(const PdbBudgets& b, const k8s::Pod& pod) {
  auto c = b.Covering(pod);
  if (!c || c->size() != 1) return {-1, 0};
  return {c->front().allowed, c->front().version};
}

TEST(PdbBudgetsSimTest, CoversMatchingPodsAndWakesWhenABudgetAllowsAgain) {
  sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  auto s = sim::SimServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  sim::SimServer& srv = **s;
  ASSERT_TRUE(
      srv.Create("/api/v1/namespaces",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}})
          .ok());
  json pdb = {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", {{"name", "infer-pdb"}, {"namespace", "ml"}}},
      {"spec", {{"maxUnavailable", 1}, {"selector", {{"matchLabels", {{"app", "infer"}}}}}}},
      {"status",
       {{"disruptionsAllowed", 0},
        {"currentHealthy", 3},
        {"desiredHealthy", 3},
        {"expectedPods", 4},
        {"observedGeneration", 1}}}};
  ASSERT_TRUE(srv.Create(kPdbs, pdb).ok());

  k8s::ClientConfig cfg;
  cfg.server = srv.Url();
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  ASSERT_TRUE(client.ok());
  PdbBudgets budgets(**client, RealClock::Default());
  std::atomic<int> wakes{0};
  std::uint64_t sub = budgets.Subscribe([&](std::string_view ns) {
    if (ns == "ml") ++wakes;
  });
  const k8s::Pod infer = PodWith("ml", "infer");
  EXPECT_FALSE(budgets.Covering(infer).has_value()) << "cannot tell before the first LIST";
  budgets.Start();
  ASSERT_TRUE(sim::WaitFor([&] { return budgets.HasSynced(); }));

  auto [allowed0, version0] = Cover(budgets, infer);
  EXPECT_EQ(allowed0, 0);
  EXPECT_TRUE(budgets.Covering(PodWith("ml", "train"))->empty());
  EXPECT_TRUE(budgets.Covering(PodWith("other", "infer"))->empty());
  EXPECT_EQ(wakes.load(), 0);

  // A replacement turned Ready: the disruption controller raises disruptionsAllowed.
  ASSERT_TRUE(srv.MergePatch(std::string(kPdbs) + "/infer-pdb",
                             {{"status", {{"disruptionsAllowed", 1}, {"currentHealthy", 4}}}})
                  .ok());
  ASSERT_TRUE(sim::WaitFor([&] { return wakes.load() >= 1 && Cover(budgets, infer).first == 1; }));
  EXPECT_GT(Cover(budgets, infer).second, version0);

  // Back to 0 (an eviction spent it): no wake-up for that.
  const int wakes_before = wakes.load();
  ASSERT_TRUE(
      srv.MergePatch(std::string(kPdbs) + "/infer-pdb", {{"status", {{"disruptionsAllowed", 0}}}})
          .ok());
  ASSERT_TRUE(sim::WaitFor([&] { return Cover(budgets, infer).first == 0; }));
  EXPECT_EQ(wakes.load(), wakes_before);

  ASSERT_TRUE(srv.Delete(std::string(kPdbs) + "/infer-pdb").ok());
  ASSERT_TRUE(sim::WaitFor([&] {
    auto c = budgets.Covering(infer);
    return c && c->empty();
  }));
  budgets.Unsubscribe(sub);
  budgets.Stop();
}

}  // namespace
}  // namespace gg::op
