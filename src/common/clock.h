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
  std::multimap<MonoTime, std::pair<TimerId, std::function<void()>>> timers_;
  TimerId next_id_ = 1;
  std::jthread thread_;
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
