// Jittered exponential backoff and a token-bucket limiter.
#include "k8s/backoff.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace gg::k8s {

std::uint64_t NextRandom(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double NextUnit(std::uint64_t& state) {
  return static_cast<double>(NextRandom(state) >> 11) * (1.0 / 9007199254740992.0);
}

Backoff::Backoff(Duration initial, Duration max, double factor, double jitter,
                 std::uint64_t start_state)
    : initial_(initial),
      max_(max),
      factor_(factor),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      state_(start_state ? start_state : std::random_device{}()) {}

Duration Backoff::Next() {
  double base = static_cast<double>(initial_.count()) * std::pow(factor_, attempt_);
  base = std::min(base, static_cast<double>(max_.count()));
  if (attempt_ < 64) ++attempt_;
  double scale = 1.0 + jitter_ * (2.0 * NextUnit(state_) - 1.0);
  return Duration(static_cast<Duration::rep>(std::max(0.0, base * scale)));
}

TokenBucket::TokenBucket(double qps, int burst, Clock& clock)
    : qps_(qps > 0 ? qps : 1.0),
      burst_(std::max(1, burst)),
      clock_(clock),
      tokens_(std::max(1, burst)),
      last_(clock.Monotonic()) {}

void TokenBucket::Refill() {
  MonoTime now = clock_.Monotonic();
  double elapsed = std::chrono::duration<double>(now - last_).count();
  if (elapsed > 0) {
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
}

bool TokenBucket::TryAcquire() {
  std::scoped_lock lock(mu_);
  Refill();
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  return false;
}

Duration TokenBucket::Reserve() {
  std::scoped_lock lock(mu_);
  Refill();
  tokens_ -= 1.0;
  if (tokens_ >= 0) return Duration(0);
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

bool TokenBucket::Wait(std::stop_token stop) {
  Duration d = Reserve();
  if (d <= Duration(0)) return !stop.stop_requested();
  return clock_.SleepFor(d, stop);
}

}  // namespace gg::k8s
