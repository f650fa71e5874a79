// RealClock and FakeClock.
#include "common/clock.h"

#include <vector>

namespace gg {

RealClock::RealClock() : thread_([this](std::stop_token st) { Run(st); }) {}

RealClock::~RealClock() {
  thread_.request_stop();
  cv_.notify_all();
}

RealClock& RealClock::Default() {
  static RealClock* clock = new RealClock();  // never destroyed: outlives all users
  return *clock;
}

bool RealClock::SleepFor(Duration d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  auto deadline = std::chrono::steady_clock::now() + d;
  return !cv.wait_until(lock, stop, deadline, [] { return false; }) && !stop.stop_requested();
}

TimerId RealClock::ScheduleAfter(Duration d, std::function<void()> fn) {
  std::scoped_lock lock(mu_);
  TimerId id = next_id_++;
  by_id_.emplace(id, timers_.emplace(Monotonic() + d, std::make_pair(id, std::move(fn))));
  cv_.notify_all();
  return id;
}

void RealClock::Cancel(TimerId id) {
  std::scoped_lock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;  // fired or cancelled already
  timers_.erase(it->second);
  by_id_.erase(it);
}

void RealClock::Run(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    if (timers_.empty()) {
      cv_.wait(lock, stop, [&] { return !timers_.empty(); });
      continue;
    }
    auto next = timers_.begin()->first;
    if (Monotonic() < next) {
      cv_.wait_until(lock, stop, next,
                     [&] { return !timers_.empty() && timers_.begin()->first < next; });
      continue;
    }
    auto fn = std::move(timers_.begin()->second.second);
    by_id_.erase(timers_.begin()->second.first);
    timers_.erase(timers_.begin());
    lock.unlock();
    fn();
    lock.lock();
  }
}

MonotonicWallClock::MonotonicWallClock(Clock& base)
    : base_(base), wall0_(base.Now()), mono0_(base.Monotonic()) {}

WallTime MonotonicWallClock::Now() const {
  return wall0_ + std::chrono::duration_cast<WallTime::duration>(base_.Monotonic() - mono0_);
}

Duration MonotonicWallClock::SkewFromBase() const {
  return std::chrono::duration_cast<Duration>(base_.Now() - Now());
}

FakeClock::FakeClock(WallTime start) : wall_start_(start) {}

WallTime FakeClock::Now() const {
  std::scoped_lock lock(mu_);
  return wall_start_ + std::chrono::duration_cast<WallTime::duration>(elapsed_ + wall_offset_);
}

MonoTime FakeClock::Monotonic() const {
  std::scoped_lock lock(mu_);
  return MonoTime(std::chrono::duration_cast<MonoTime::duration>(elapsed_)) + std::chrono::hours(1);
}

bool FakeClock::SleepFor(Duration d, std::stop_token stop) {
  std::unique_lock lock(mu_);
  Duration deadline = elapsed_ + d;
  ++sleepers_;
  cv_.notify_all();
  bool reached = cv_.wait(lock, stop, [&] { return elapsed_ >= deadline; });
  --sleepers_;
  return reached;
}

TimerId FakeClock::ScheduleAfter(Duration d, std::function<void()> fn) {
  std::scoped_lock lock(mu_);
  TimerId id = next_id_++;
  timers_.emplace(elapsed_ + d, std::make_pair(id, std::move(fn)));
  return id;
}

void FakeClock::Cancel(TimerId id) {
  std::scoped_lock lock(mu_);
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->second.first == id) {
      timers_.erase(it);
      return;
    }
  }
}

void FakeClock::Advance(Duration d) {
  std::unique_lock lock(mu_);
  Duration target = elapsed_ + d;
  // Fire timers in order, moving time to each deadline so callbacks see a consistent Now().
  while (!timers_.empty() && timers_.begin()->first <= target) {
    auto it = timers_.begin();
    elapsed_ = std::max(elapsed_, it->first);
    auto fn = std::move(it->second.second);
    timers_.erase(it);
    lock.unlock();
    cv_.notify_all();
    fn();
    lock.lock();
  }
  elapsed_ = std::max(elapsed_, target);
  lock.unlock();
  cv_.notify_all();
}

void FakeClock::SetWall(WallTime t) {
  std::scoped_lock lock(mu_);
  wall_offset_ = std::chrono::duration_cast<Duration>(t - wall_start_) - elapsed_;
}

std::size_t FakeClock::PendingTimers() const {
  std::scoped_lock lock(mu_);
  return timers_.size();
}

std::size_t FakeClock::Sleepers() const {
  std::scoped_lock lock(mu_);
  return sleepers_;
}

}  // namespace gg
