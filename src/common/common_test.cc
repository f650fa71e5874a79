// Unit tests for Status, time helpers, FakeClock and the logger.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "common/time_util.h"
#include "common/wake_batch.h"

namespace gg {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}

Status UseHalf(int x, int* out) {
  GG_ASSIGN_OR_RETURN(*out, Half(x));
  return OkStatus();
}

TEST(Status, CodesAndMacros) {
  int v = 0;
  EXPECT_TRUE(UseHalf(4, &v).ok());
  EXPECT_EQ(v, 2);
  Status s = UseHalf(3, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: odd");
  EXPECT_EQ(s.WithContext("halving").message(), "halving: odd");
  EXPECT_TRUE(IsTransient(UnavailableError("x")));
  EXPECT_FALSE(IsTransient(InvalidArgumentError("x")));
  StatusOr<int> from_ok = OkStatus();
  EXPECT_FALSE(from_ok.ok());
}

TEST(TimeUtil, Rfc3339RoundTrip) {
  auto t = ParseRfc3339("2026-11-29T22:36:53Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(FormatRfc3339(*t), "2026-11-29T22:36:53Z");
  auto micro = ParseRfc3339("2026-11-29T22:36:53.123456Z");
  ASSERT_TRUE(micro.ok());
  EXPECT_EQ(FormatRfc3339Micro(*micro), "2026-11-29T22:36:53.123456Z");
  auto off = ParseRfc3339("2026-11-29T23:36:53+01:00");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, *t);
  EXPECT_FALSE(ParseRfc3339("yesterday").ok());
  EXPECT_FALSE(ParseRfc3339("2026-13-01T00:00:00Z").ok());
  EXPECT_FALSE(ParseRfc3339("2026-11-29T22:36:53").ok());
}

TEST(TimeUtil, Durations) {
  using namespace std::chrono;
  EXPECT_EQ(*ParseDuration("10m"), minutes(10));
  EXPECT_EQ(*ParseDuration("1h30m"), minutes(90));
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("1.5s"), milliseconds(1500));
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_FALSE(ParseDuration("10").ok());
  EXPECT_FALSE(ParseDuration("5 minutes").ok());
  EXPECT_EQ(FormatDuration(minutes(90)), "1h30m");
  EXPECT_EQ(FormatDuration(seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
}

TEST(FakeClock, TimersFireInOrderOnAdvance) {
  FakeClock clock;
  std::vector<int> fired;
  clock.ScheduleAfter(std::chrono::seconds(2), [&] { fired.push_back(2); });
  clock.ScheduleAfter(std::chrono::seconds(1), [&] { fired.push_back(1); });
  TimerId cancelled = clock.ScheduleAfter(std::chrono::seconds(1), [&] { fired.push_back(99); });
  clock.Cancel(cancelled);
  clock.Advance(std::chrono::milliseconds(500));
  EXPECT_TRUE(fired.empty());
  clock.Advance(std::chrono::seconds(2));
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
  EXPECT_EQ(clock.PendingTimers(), 0u);
}

TEST(FakeClock, SleepWakesOnAdvanceAndStop) {
  FakeClock clock;
  std::atomic<bool> woke{false};
  std::jthread t([&](std::stop_token st) { woke = clock.SleepFor(std::chrono::seconds(5), st); });
  while (clock.Sleepers() == 0) std::this_thread::yield();
  clock.Advance(std::chrono::seconds(5));
  t.join();
  EXPECT_TRUE(woke);

  std::atomic<bool> result{true};
  std::jthread t2([&](std::stop_token st) { result = clock.SleepFor(std::chrono::hours(1), st); });
  while (clock.Sleepers() == 0) std::this_thread::yield();
  t2.request_stop();
  t2.join();
  EXPECT_FALSE(result);
}

// The system clock is set back an hour and then corrected: wall time read through
// MonotonicWallClock advances exactly as the monotonic clock does, through both steps.
TEST(RealClock, CancelDropsOnlyThatTimerAndIsANoOpOnceFired) {
  RealClock clock;
  std::atomic<int> fired_a{0}, fired_b{0}, fired_c{0};
  TimerId a = clock.ScheduleAfter(std::chrono::milliseconds(1), [&] { ++fired_a; });
  TimerId b = clock.ScheduleAfter(std::chrono::milliseconds(20), [&] { ++fired_b; });
  // Same deadline as b: the multimap holds both; cancelling b must not drop c.
  TimerId c = clock.ScheduleAfter(std::chrono::milliseconds(20), [&] { ++fired_c; });
  clock.Cancel(b);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((fired_a.load() == 0 || fired_c.load() == 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(fired_a.load(), 1);
  EXPECT_EQ(fired_c.load(), 1);
  clock.Cancel(a);  // already fired: nothing to do
  clock.Cancel(c);
  clock.Cancel(b);  // already cancelled
  // A timer scheduled after all that still fires: the id index stayed consistent.
  std::atomic<int> fired_d{0};
  clock.ScheduleAfter(std::chrono::milliseconds(1), [&] { ++fired_d; });
  while (fired_d.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(fired_d.load(), 1);
  EXPECT_EQ(fired_b.load(), 0);
  (void)c;
}

TEST(MonotonicWallClock, IgnoresStepsOfTheSystemClock) {
  FakeClock system;
  MonotonicWallClock clock(system);
  const WallTime start = clock.Now();
  EXPECT_EQ(start, system.Now());
  system.Advance(std::chrono::seconds(10));
  EXPECT_EQ(clock.Now() - start, std::chrono::seconds(10));
  system.SetWall(system.Now() - std::chrono::hours(1));  // set back
  system.Advance(std::chrono::seconds(5));
  const WallTime turned_healthy = clock.Now();
  EXPECT_EQ(turned_healthy - start, std::chrono::seconds(15));
  system.SetWall(system.Now() + std::chrono::hours(1));  // corrected
  system.Advance(std::chrono::seconds(1));
  EXPECT_EQ(clock.Now() - turned_healthy, std::chrono::seconds(1)) << "the correction counted";
  EXPECT_EQ(clock.SkewFromBase(), Duration(0));
  system.SetWall(system.Now() + std::chrono::minutes(2));
  EXPECT_EQ(clock.SkewFromBase(), std::chrono::minutes(2));
  EXPECT_EQ(clock.Monotonic(), system.Monotonic());
}

class CaptureSink : public LogSink {
 public:
  void Write(std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> lines;
};

TEST(Logger, JsonAndRedaction) {
  auto sink = std::make_shared<CaptureSink>();
  Logger::SetGlobalFormat(LogFormat::kJson);
  Logger log(sink);
  log.WithValues({{"controller", "node"}})
      .Info("tainted \"node\"", {{"node", "gpu-1"}, {"token", "abc"}, {"n", 3}});
  Logger::SetGlobalFormat(LogFormat::kText);
  ASSERT_EQ(sink->lines.size(), 1u);
  const std::string& l = sink->lines[0];
  EXPECT_NE(l.find("\"msg\":\"tainted \\\"node\\\"\""), std::string::npos) << l;
  EXPECT_NE(l.find("\"controller\":\"node\""), std::string::npos);
  EXPECT_NE(l.find("\"n\":3"), std::string::npos);
  EXPECT_EQ(l.find("abc"), std::string::npos);
  EXPECT_NE(l.find("[REDACTED]"), std::string::npos);
}

// A deferred wake runs once per owner, when the outermost batch closes, and keeps its owner
// alive until then; with no batch open nothing is deferred.
TEST(WakeBatch, DefersEachOwnersWakeToTheOutermostClose) {
  struct Owner {
    int wakes = 0;
  };
  auto wake = [](void* p) { ++static_cast<Owner*>(p)->wakes; };
  auto a = std::make_shared<Owner>();
  auto b = std::make_shared<Owner>();
  std::weak_ptr<Owner> gone;
  EXPECT_FALSE(WakeBatch::Defer(a, wake));
  {
    WakeBatch outer;
    EXPECT_TRUE(WakeBatch::Defer(a, wake));
    {
      WakeBatch inner;
      EXPECT_TRUE(WakeBatch::Defer(a, wake));
      EXPECT_TRUE(WakeBatch::Defer(b, wake));
    }
    EXPECT_EQ(a->wakes, 0);  // the inner close sends nothing
    EXPECT_EQ(b->wakes, 0);
    auto c = std::make_shared<Owner>();
    gone = c;
    EXPECT_TRUE(WakeBatch::Defer(c, wake));
  }
  EXPECT_EQ(a->wakes, 1);
  EXPECT_EQ(b->wakes, 1);
  EXPECT_TRUE(gone.expired());  // released after its wake ran
  EXPECT_FALSE(WakeBatch::Defer(a, wake));
  // Another thread's batch is its own.
  WakeBatch here;
  std::thread([&] { EXPECT_FALSE(WakeBatch::Defer(b, wake)); }).join();
}

}  // namespace
}  // namespace gg
