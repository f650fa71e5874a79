// Waker: "sleep until notified, stopped, or `d` of the injected clock has passed". The
// timeout is a Clock timer, so FakeClock::Advance wakes it in tests exactly as real time
// does in production; Notify() wakes it early (a new Xid, a changed report).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>

#include "common/clock.h"

namespace gg::agent {

class Waker {
 public:
  explicit Waker(Clock& clock) : clock_(clock), state_(std::make_shared<State>()) {}
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  // Wakes the current (or next) Wait. Thread-safe.
  void Notify() {
    {
      std::scoped_lock lock(state_->mu);
      state_->notified = true;
    }
    state_->cv.notify_all();
  }

  // Returns true when woken by Notify(), false on timeout or stop. A Notify() that happened
  // before the call counts (it is not lost).
  bool Wait(Duration d, std::stop_token stop) {
    auto state = state_;
    bool timed_out = false;
    auto flag = std::make_shared<bool>(false);
    TimerId id = clock_.ScheduleAfter(d, [state, flag] {
      {
        std::scoped_lock lock(state->mu);
        *flag = true;
      }
      state->cv.notify_all();
    });
    bool notified = false;
    {
      std::unique_lock lock(state->mu);
      state->cv.wait(lock, stop, [&] { return state->notified || *flag; });
      notified = state->notified;
      timed_out = *flag;
      state->notified = false;
    }
    if (!timed_out) clock_.Cancel(id);
    return notified && !stop.stop_requested();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable_any cv;
    bool notified = false;
  };
  Clock& clock_;
  std::shared_ptr<State> state_;
};

}  // namespace gg::agent
