// Unit tests for Controller: requeue with backoff, terminal errors, exceptions, periodic
// requeue, per-reconcile log context, concurrency and prompt shutdown.
#include "runtime/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

namespace gg::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

template <typename F>
bool Eventually(F f, std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return f();
}

// Returns scripted outcomes per key; OK once the script runs out.
class ScriptedReconciler : public Reconciler {
 public:
  using Step = std::function<StatusOr<Result>()>;
  void Script(const std::string& key, std::vector<Step> steps) {
    std::scoped_lock lock(mu_);
    scripts_[key] = std::move(steps);
  }
  StatusOr<Result> Reconcile(const std::string& key, std::stop_token) override {
    Step step;
    {
      std::scoped_lock lock(mu_);
      ++calls_[key];
      auto& s = scripts_[key];
      if (!s.empty()) {
        step = std::move(s.front());
        s.erase(s.begin());
      }
    }
    if (step) return step();
    return Result{};
  }
  int Calls(const std::string& key) {
    std::scoped_lock lock(mu_);
    return calls_[key];
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<Step>> scripts_;
  std::map<std::string, int> calls_;
};

StatusOr<Result> Fail(Status s) { return s; }

class ControllerTest : public ::testing::Test {
 protected:
  double Metric(const std::string& name, const metrics::LabelValues& labels) {
    return registry_.Value(name, labels);
  }
  FakeClock clock_;
  metrics::Registry registry_;
  WorkQueue queue_{"nodes", clock_, &registry_};
  ScriptedReconciler reconciler_;
  std::vector<std::pair<std::string, Status>> terminal_;
  Controller controller_{
      "node",
      reconciler_,
      queue_,
      {.workers = 2,
       .on_terminal_error = [this](const std::string& k,
                                   const Status& s) { terminal_.emplace_back(k, s); }},
      registry_};
  std::stop_source stop_;
};

TEST_F(ControllerTest, MetricsExistAtZero) {
  for (const char* r : {"success", "error", "requeue", "requeue_after"})
    EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", r}), 0) << r;
  EXPECT_EQ(Metric("controller_runtime_reconcile_errors_total", {"node"}), 0);
  EXPECT_EQ(Metric("controller_runtime_max_concurrent_reconciles", {"node"}), 2);
  EXPECT_EQ(Metric("controller_runtime_active_workers", {"node"}), 0);
}

TEST_F(ControllerTest, TransientErrorsRequeueWithBackoffThenSucceed) {
  reconciler_.Script("a", {[] { return Fail(UnavailableError("apiserver down")); },
                           [] { return Fail(AbortedError("conflict")); }});
  queue_.Add("a");
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(queue_.Len(), 0u);
  EXPECT_EQ(queue_.Waiting(), 1u);
  clock_.Advance(milliseconds(5));  // first backoff: 5 ms
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  clock_.Advance(milliseconds(9));  // second: 10 ms
  EXPECT_EQ(queue_.Len(), 0u);
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(queue_.Len(), 1u);
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(reconciler_.Calls("a"), 3);
  EXPECT_EQ(queue_.NumRequeues("a"), 0);  // forgotten on success
  EXPECT_EQ(queue_.Waiting(), 0u);
  EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", "error"}), 2);
  EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", "success"}), 1);
  EXPECT_EQ(Metric("controller_runtime_reconcile_errors_total", {"node"}), 2);
  EXPECT_EQ(Metric("controller_runtime_reconcile_time_seconds", {"node"}), 3);  // count
  EXPECT_EQ(Metric("workqueue_retries_total", {"nodes"}), 2);
}

TEST_F(ControllerTest, TerminalErrorsAreNotRetried) {
  reconciler_.Script("bad", {[] { return Fail(InvalidArgumentError("policy invalid")); }});
  queue_.Add("bad");
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(queue_.Len(), 0u);
  EXPECT_EQ(queue_.Waiting(), 0u);
  clock_.Advance(seconds(2000));
  EXPECT_EQ(queue_.Len(), 0u);
  ASSERT_EQ(terminal_.size(), 1u);
  EXPECT_EQ(terminal_[0].first, "bad");
  EXPECT_EQ(terminal_[0].second.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Metric("controller_runtime_terminal_reconcile_errors_total", {"node"}), 1);
  EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", "error"}), 1);
}

TEST_F(ControllerTest, NotFoundIsDone) {
  reconciler_.Script("gone", {[] { return Fail(NotFoundError("node gone")); }});
  queue_.Add("gone");
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(queue_.Waiting(), 0u);
  EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", "success"}), 1);
  EXPECT_EQ(Metric("controller_runtime_reconcile_errors_total", {"node"}), 0);
}

TEST_F(ControllerTest, ExceptionsAreCaughtCountedAndRetried) {
  reconciler_.Script("x", {[]() -> StatusOr<Result> { throw std::runtime_error("boom"); },
                           []() -> StatusOr<Result> { throw 42; }});
  queue_.Add("x");
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(Metric("controller_runtime_reconcile_panics_total", {"node"}), 1);
  EXPECT_EQ(queue_.Waiting(), 1u);  // Internal → rate-limited requeue
  clock_.Advance(milliseconds(5));
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(Metric("controller_runtime_reconcile_panics_total", {"node"}), 2);
  clock_.Advance(milliseconds(10));
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", "success"}), 1);
  EXPECT_EQ(controller_.ActiveWorkers(), 0);
}

TEST_F(ControllerTest, PeriodicRequeueAndRetryAfter) {
  reconciler_.Script("p", {[]() -> StatusOr<Result> { return Result{seconds(30)}; }});
  Status throttled = ResourceExhaustedError("429");
  throttled.set_retry_after_seconds(7);
  reconciler_.Script("t", {[throttled] { return Fail(throttled); }});
  queue_.Add("p");
  queue_.Add("t");
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  ASSERT_TRUE(controller_.ProcessNext(stop_.get_token()));
  EXPECT_EQ(queue_.Waiting(), 2u);
  clock_.Advance(milliseconds(6999));
  EXPECT_EQ(queue_.Len(), 0u);
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(queue_.TryGet(), "t");
  clock_.Advance(seconds(23));
  EXPECT_EQ(queue_.TryGet(), "p");
  EXPECT_EQ(Metric("controller_runtime_reconcile_total", {"node", "requeue_after"}), 1);
}

class CaptureSink : public LogSink {
 public:
  void Write(std::string_view line) override {
    std::scoped_lock lock(mu);
    lines.emplace_back(line);
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

TEST(Controller, PerReconcileLogContext) {
  auto sink = std::make_shared<CaptureSink>();
  FakeClock clock;
  metrics::Registry registry;
  WorkQueue queue("q", clock);
  struct LoggingReconciler : Reconciler {
    std::string id;
    StatusOr<Result> Reconcile(const std::string&, std::stop_token) override {
      id = CurrentReconcileId();
      ReconcileLogger().Info("inside");
      return Result{};
    }
  } reconciler;
  Controller c("ctl", reconciler, queue, {}, registry, Logger(sink));
  queue.Add("node-7");
  std::stop_source stop;
  ASSERT_TRUE(c.ProcessNext(stop.get_token()));
  EXPECT_EQ(reconciler.id.size(), 36u);
  EXPECT_EQ(CurrentReconcileId(), "");  // cleared after the reconcile
  std::scoped_lock lock(sink->mu);
  bool found = false;
  for (const auto& l : sink->lines) {
    if (l.find("inside") == std::string::npos) continue;
    found = true;
    EXPECT_NE(l.find("ctl"), std::string::npos) << l;
    EXPECT_NE(l.find("node-7"), std::string::npos) << l;
    EXPECT_NE(l.find(reconciler.id), std::string::npos) << l;
  }
  EXPECT_TRUE(found);
}

// Many workers, many adds of few keys: a key is never reconciled twice at the same time.
TEST(Controller, WorkersNeverReconcileTheSameKeyConcurrently) {
  FakeClock clock;
  metrics::Registry registry;
  WorkQueue queue("conc", clock, &registry);
  struct Tracking : Reconciler {
    std::mutex mu;
    std::set<std::string> in_flight;
    std::atomic<bool> overlap{false};
    std::atomic<int> calls{0};
    StatusOr<Result> Reconcile(const std::string& key, std::stop_token) override {
      {
        std::scoped_lock lock(mu);
        if (!in_flight.insert(key).second) overlap = true;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      {
        std::scoped_lock lock(mu);
        in_flight.erase(key);
      }
      ++calls;
      return Result{};
    }
  } reconciler;
  Controller c("conc", reconciler, queue, {.workers = 4}, registry);
  std::stop_source stop;
  std::jthread runner([&] { EXPECT_TRUE(c.Run(stop.get_token()).ok()); });
  std::vector<std::jthread> producers;
  for (int p = 0; p < 2; ++p)
    producers.emplace_back([&queue, p] {
      for (int i = 0; i < 2000; ++i) queue.Add("k" + std::to_string((i + p) % 8));
    });
  producers.clear();
  ASSERT_TRUE(Eventually([&] { return queue.Len() == 0 && queue.Processing() == 0; }));
  stop.request_stop();
  runner.join();
  EXPECT_FALSE(reconciler.overlap);
  EXPECT_GE(reconciler.calls, 8);
  EXPECT_TRUE(queue.ShuttingDown());
  EXPECT_EQ(registry.Value("controller_runtime_active_workers", {"conc"}), 0);
}

TEST(Controller, StopEndsRunWhileAReconcileIsInFlight) {
  FakeClock clock;
  metrics::Registry registry;
  WorkQueue queue("slow", clock);
  struct Blocking : Reconciler {
    std::atomic<bool> started{false};
    StatusOr<Result> Reconcile(const std::string&, std::stop_token stop) override {
      started = true;
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });  // until shutdown
      return CancelledError("shutting down");
    }
  } reconciler;
  Controller c("slow", reconciler, queue, {.workers = 3}, registry);
  queue.Add("a");
  std::stop_source stop;
  std::atomic<bool> done{false};
  std::jthread runner([&] {
    EXPECT_TRUE(c.Run(stop.get_token()).ok());
    done = true;
  });
  ASSERT_TRUE(Eventually([&] { return reconciler.started.load(); }));
  auto t0 = std::chrono::steady_clock::now();
  stop.request_stop();
  runner.join();
  EXPECT_TRUE(done);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(5));
  EXPECT_EQ(queue.Waiting(), 0u);  // the cancelled item is not left behind in a timer
}

}  // namespace
}  // namespace gg::runtime
