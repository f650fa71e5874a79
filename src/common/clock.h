// Clock: the injected source of time. Production uses RealClock; tests use FakeClock,
// whose timers and sleepers fire only when the test advances it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <stop_token>
#include <thread>
#include <unordered_map>

namespace gg {

using WallTime = std::chrono::system_clock::time_point;
using MonoTime = std::chrono::steady_clock::time_point;
using Duration = std::chrono::nanoseconds;
using TimerId = std::uint64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (what goes into Kubernetes timestamps).
  virtual WallTime Now() const = 0;
  // Monotonic time (what measures intervals and deadlines).
  virtual MonoTime Monotonic() const = 0;
  // Blocks for `d` of this clock's time. Returns false if `stop` was requested first.
  virtual bool SleepFor(Duration d, std::stop_token stop) = 0;
  // Runs `fn` once after `d` on a clock-owned thread. Cancel(id) before it fires drops it.
  virtual TimerId ScheduleAfter(Duration d, std::function<void()> fn) = 0;
  virtual void Cancel(TimerId id) = 0;
};

// The system clocks; timers run on one internal thread.
class RealClock final : public Clock {
 public:
  RealClock();
  ~RealClock() override;
  RealClock(const RealClock&) = delete;
  RealClock& operator=(const RealClock&) = delete;

  WallTime Now() const override { return std::chrono::system_clock::now(); }
  MonoTime Monotonic() const override { return std::chrono::steady_clock::now(); }
  bool SleepFor(Duration d, std::stop_token stop) override;
  TimerId ScheduleAfter(Duration d, std::function<void()> fn) override;
  void Cancel(TimerId id) override;

  // A process-wide instance for binaries' main(); libraries take a Clock& instead.
  static RealClock& Default();

 private:
  void Run(std::stop_token stop);
  std::mutex mu_;
  std::condition_variable_any cv_;
  using Timers = std::multimap<MonoTime, std::pair<TimerId, std::function<void()>>>;
  Timers timers_;
  // Cancel in O(log n): a fleet-sized operator keeps one timer per node (100k) and cancels
  // them often; a scan of timers_ per Cancel made each one O(fleet) under mu_.
  std::unordered_map<TimerId, Timers::iterator> by_id_;
  TimerId next_id_ = 1;
  std::jthread thread_;
};

// Wall time that advances only with the monotonic clock: Now() = the base clock's wall time
// when this was built + the base's monotonic time elapsed since. A step of the system clock
// (set back, then corrected; a bad NTP server) is never seen, so durations computed from wall
// timestamps this process writes and reads (recovery's healthyFor, a Lease's renewTime) count
// only time that really passed. The cost: the offset at start is kept for the process'
// lifetime (a clock wrong at start stays wrong here until restart), and CLOCK_MONOTONIC does not
// advance while the machine is suspended. Everything but Now() is the base clock's.
class MonotonicWallClock final : public Clock {
 public:
  explicit MonotonicWallClock(Clock& base);
  WallTime Now() const override;
  MonoTime Monotonic() const override { return base_.Monotonic(); }
  bool SleepFor(Duration d, std::stop_token stop) override { return base_.SleepFor(d, stop); }
  TimerId ScheduleAfter(Duration d, std::function<void()> fn) override {
    return base_.ScheduleAfter(d, std::move(fn));
  }
  void Cancel(TimerId id) override { base_.Cancel(id); }
  // How far the base's wall clock is from ours now (positive: base ahead), e.g. for a log line.
  Duration SkewFromBase() const;

 private:
  Clock& base_;
  WallTime wall0_;
  MonoTime mono0_;
};

// Manual time for tests. Advance() fires due timers (in deadline order, on the caller's
// thread) and wakes sleepers whose deadline has passed.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(WallTime start = WallTime(std::chrono::seconds(1'700'000'000)));

  WallTime Now() const override;
  MonoTime Monotonic() const override;
  bool SleepFor(Duration d, std::stop_token stop) override;
  TimerId ScheduleAfter(Duration d, std::function<void()> fn) override;
  void Cancel(TimerId id) override;

  void Advance(Duration d);
  void SetWall(WallTime t);  // jumps wall time only (clock-jump tests); monotonic unchanged
  std::size_t PendingTimers() const;
  std::size_t Sleepers() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  Duration elapsed_{0};
  WallTime wall_start_;
  Duration wall_offset_{0};
  std::multimap<Duration, std::pair<TimerId, std::function<void()>>> timers_;
  TimerId next_id_ = 1;
  std::size_t sleepers_ = 0;
};

}  // namespace gg
