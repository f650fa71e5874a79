// Informer against the simulator: sync, live events, watch cut → resume without LIST,
// compaction/forced 410 → exactly one relist, deletes seen.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "k8s/rest_client.h"
#include "runtime/informer.h"
#include "sim/server.h"

namespace gg::runtime {
namespace {

template <typename Pred>
bool WaitFor(Pred p) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!p()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

nlohmann::json NodeJson(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
          {"status", {{"capacity", {{"nvidia.com/gpu", "8"}}}}}};
}

TEST(InformerSimTest, SyncEventsResumeAndRelist) {
  gg::sim::SimOptions o;
  o.kubelet = o.scheduler = o.controllers = false;
  o.bookmark_interval = std::chrono::milliseconds(100);
  auto sim = gg::sim::SimServer::Start(o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  auto& s = **sim;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(s.Create("/api/v1/nodes", NodeJson("n" + std::to_string(i))).ok());
  k8s::ClientConfig cfg;
  cfg.server = s.Url();
  auto client = k8s::RestClient::Create(cfg, RealClock::Default());
  ASSERT_TRUE(client.ok());
  InformerOptions io;
  io.page_size = 2;
  io.backoff_initial = std::chrono::milliseconds(10);
  io.backoff_max = std::chrono::milliseconds(50);
  io.watch_timeout_seconds = 1;  // streams end every 1-2 s: each must resume, never relist
  Informer<k8s::Node> inf(**client, k8s::kNodes, RealClock::Default(), io);
  std::atomic<int> adds{0}, updates{0}, deletes{0};
  inf.AddEventHandler({[&](const k8s::Node&) { ++adds; },
                       [&](const k8s::Node&, const k8s::Node&) { ++updates; },
                       [&](const k8s::Node&) { ++deletes; }});
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync({}, std::chrono::seconds(30)));
  EXPECT_EQ(inf.Size(), 5u);
  EXPECT_EQ(inf.stats().list_pages.load(), 3u);
  EXPECT_EQ(inf.Get("", "n1")->gpu_capacity, 8);

  // Live changes.
  ASSERT_TRUE(s.MergePatch("/api/v1/nodes/n1", {{"spec", {{"unschedulable", true}}}}).ok());
  ASSERT_TRUE(s.Delete("/api/v1/nodes/n2").ok());
  ASSERT_TRUE(s.Create("/api/v1/nodes", NodeJson("n9")).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto n1 = inf.Get("", "n1");
    return n1 && n1->unschedulable && !inf.Get("", "n2") && inf.Get("", "n9");
  }));
  EXPECT_EQ(deletes.load(), 1);

  // Cut every watch after one event: the informer resumes from its resourceVersion, no LIST.
  gg::sim::FaultConfig cut;
  cut.watch_cut_after_events = 1;
  s.SetFaults(cut);
  // The simulator applies the fault to watches opened from now on.
  auto w0 = inf.stats().watches.load();
  ASSERT_TRUE(WaitFor([&] { return inf.stats().watches.load() > w0; }));
  auto w1 = inf.stats().watches.load();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s.MergePatch("/api/v1/nodes/n3",
                             {{"metadata", {{"labels", {{"step", std::to_string(i)}}}}}})
                    .ok());
  }
  ASSERT_TRUE(WaitFor([&] {
    auto n3 = inf.Get("", "n3");
    return n3 && n3->meta.labels.Get("step").value_or("") == "3";
  }));
  EXPECT_GT(inf.stats().watches.load(), w1) << "the watch was not cut";
  EXPECT_EQ(inf.stats().lists.load(), 1u) << "a cut watch must not cause a relist";

  // Streams are still cut after one event (the simulator reads that when a watch starts);
  // now the next reconnect answers 410: exactly one relist, and the cache still converges.
  gg::sim::FaultConfig expire;
  expire.watch_cut_after_events = 1;
  expire.force_watch_410 = 1;
  s.SetFaults(expire);
  ASSERT_TRUE(s.Delete("/api/v1/nodes/n4").ok());
  ASSERT_TRUE(WaitFor([&] { return inf.stats().relists.load() >= 1; }))
      << "watches=" << inf.stats().watches.load() << " errors=" << inf.stats().errors.load()
      << " events=" << inf.stats().events.load() << " n4=" << (inf.Get("", "n4") != nullptr);
  s.ClearFaults();
  ASSERT_TRUE(s.Create("/api/v1/nodes", NodeJson("n10")).ok());
  ASSERT_TRUE(WaitFor([&] { return inf.Get("", "n10") != nullptr; }));
  EXPECT_EQ(inf.Get("", "n4"), nullptr);
  EXPECT_EQ(inf.Size(), 5u);  // n0 n1 n3 n9 n10
  EXPECT_EQ(inf.stats().relists.load(), 1u);
  EXPECT_EQ(inf.stats().lists.load(), 2u);
  inf.Stop();
}

}  // namespace
}  // namespace gg::runtime
