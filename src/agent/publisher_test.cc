// Publisher: writes on change only, coalesces bursts, heartbeats, retries with the newest
// report after failures — driven by FakeClock, asserting what the writer received.
#include "agent/publisher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "metrics/registry.h"

namespace gg::agent {
namespace {

using namespace std::chrono_literals;

class FakeWriter final : public ReportWriter {
 public:
  struct Shared {
    std::mutex mu;
    std::vector<api::GpuNodeHealthStatus> written;
    int attempts = 0;
    bool fail = false;
  };
  explicit FakeWriter(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
  std::string_view Mode() const override { return "fake"; }
  Status Write(const api::GpuNodeHealthStatus& r) override {
    std::scoped_lock lock(s_->mu);
    ++s_->attempts;
    if (s_->fail) return UnavailableError("API down");
    s_->written.push_back(r);
    return OkStatus();
  }

 private:
  std::shared_ptr<Shared> s_;
};

// Waits (real time) for a condition the publisher thread makes true.
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

api::GpuNodeHealthStatus Report(int temp) {
  api::GpuNodeHealthStatus r;
  r.node_name = "n1";
  api::GpuStatus g;
  g.uuid = "GPU-a";
  g.temperature_c = temp;
  g.slowdown_temperature_c = 90;
  r.gpus.push_back(g);
  return r;
}

struct Fixture {
  FakeClock clock;
  std::shared_ptr<FakeWriter::Shared> shared = std::make_shared<FakeWriter::Shared>();
  metrics::Registry registry;
  AgentMetrics metrics{registry, "n1"};
  std::unique_ptr<Publisher> pub;
  Fixture(PublisherOptions o = {}) {
    o.jitter_seed = 42;
    pub = std::make_unique<Publisher>(std::make_unique<FakeWriter>(shared), clock, o, &metrics);
    pub->Start();
  }
  size_t Written() {
    std::scoped_lock lock(shared->mu);
    return shared->written.size();
  }
  api::GpuNodeHealthStatus Last() {
    std::scoped_lock lock(shared->mu);
    return shared->written.back();
  }
  int Attempts() {
    std::scoped_lock lock(shared->mu);
    return shared->attempts;
  }
  void SetFail(bool f) {
    std::scoped_lock lock(shared->mu);
    shared->fail = f;
  }
  // Advances in small steps so the publisher thread can re-arm its timers in between.
  void Advance(Duration d, Duration step = 50ms) {
    for (Duration done{0}; done < d; done += step) {
      clock.Advance(step);
      std::this_thread::sleep_for(1ms);
    }
  }
};

TEST(Publisher, FirstReportIsWrittenAtOnceAndStamped) {
  Fixture f;
  f.pub->Offer(Report(90));
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 1; }));
  EXPECT_EQ(f.Last().heartbeat_time, f.clock.Now());
  EXPECT_EQ(f.registry.Value("gpu_guardian_agent_publishes_total", {"change"}), 1);
}

TEST(Publisher, UnchangedFactsAreNeverRewrittenBeforeTheHeartbeat) {
  Fixture f;
  f.pub->Offer(Report(90));
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 1; }));
  for (int i = 0; i < 20; ++i) {
    auto r = Report(90);
    r.observed_at = f.clock.Now();
    f.pub->Offer(r);
    f.Advance(1s, 500ms);
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.Written(), 1u);
}

TEST(Publisher, HeartbeatRewritesUnchangedReport) {
  PublisherOptions o;
  o.heartbeat = 60s;
  Fixture f(o);
  f.pub->Offer(Report(90));
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 1; }));
  f.Advance(61s, 1s);
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 2; }));
  EXPECT_TRUE(api::SameFacts(f.Last(), Report(90)));
  EXPECT_EQ(f.pub->stats().heartbeats, 1u);
  EXPECT_EQ(f.registry.Value("gpu_guardian_agent_publishes_total", {"heartbeat"}), 1);
}

TEST(Publisher, BurstOfChangesCoalescesIntoOneWritePerWindow) {
  PublisherOptions o;
  o.debounce = 200ms;
  Fixture f(o);
  f.pub->Offer(Report(90));
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 1; }));
  // Five changes inside one debounce window: one more write, with the newest facts.
  for (int t = 91; t <= 95; ++t) f.pub->Offer(Report(t));
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(f.Written(), 1u);  // still inside the window (FakeClock has not moved)
  f.Advance(250ms, 50ms);
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 2; }));
  EXPECT_EQ(f.Last().gpus[0].temperature_c, 95);
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(f.Written(), 2u);
}

TEST(Publisher, ApiOutageRetriesAndPublishesTheLatestState) {
  PublisherOptions o;
  o.initial_backoff = 1s;
  o.max_backoff = 4s;
  Fixture f(o);
  f.SetFail(true);
  f.pub->Offer(Report(90));
  ASSERT_TRUE(WaitFor([&] { return f.Attempts() >= 1; }));
  f.pub->Offer(Report(91));
  f.pub->Offer(Report(93));
  f.Advance(10s, 250ms);
  ASSERT_TRUE(WaitFor([&] { return f.Attempts() >= 3; }));
  EXPECT_EQ(f.Written(), 0u);
  EXPECT_FALSE(f.pub->stats().last_ok);
  EXPECT_GE(f.registry.Value("gpu_guardian_agent_publishes_total", {"error"}), 3);
  f.SetFail(false);
  f.Advance(6s, 250ms);
  ASSERT_TRUE(WaitFor([&] { return f.Written() == 1; }));
  EXPECT_EQ(f.Last().gpus[0].temperature_c, 93);
  EXPECT_TRUE(f.pub->stats().last_ok);
}

TEST(Publisher, OfferNeverBlocksOnASlowWriter) {
  FakeClock clock;
  struct SlowWriter final : ReportWriter {
    std::atomic<bool> release{false};
    std::string_view Mode() const override { return "slow"; }
    Status Write(const api::GpuNodeHealthStatus&) override {
      while (!release.load()) std::this_thread::sleep_for(1ms);
      return OkStatus();
    }
  };
  auto w = std::make_unique<SlowWriter>();
  auto* raw = w.get();
  Publisher pub(std::move(w), clock, {}, nullptr);
  pub.Start();
  pub.Offer(Report(90));
  std::this_thread::sleep_for(20ms);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) pub.Offer(Report(90 + i % 5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // did not wait for the writer
  raw->release = true;
  pub.Stop();
}

}  // namespace
}  // namespace gg::agent
