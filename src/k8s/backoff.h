// Backoff and rate limiting used by the RestClient and the informer: jittered exponential
// backoff and a client-side token bucket (QPS/burst), both driven by an injected Clock.
#pragma once

#include <cstdint>
#include <mutex>
#include <stop_token>

#include "common/clock.h"

namespace gg::k8s {

// initial, initial*factor, ... capped at max; each value is scaled by a random factor in
// [1 - jitter, 1 + jitter] (never above max*(1+jitter)).
class Backoff {
 public:
  Backoff(Duration initial, Duration max, double factor = 2.0, double jitter = 0.2,
          std::uint64_t start_state = 0);
  Duration Next();
  void Reset() { attempt_ = 0; }
  int attempt() const { return attempt_; }

 private:
  Duration initial_, max_;
  double factor_, jitter_;
  int attempt_ = 0;
  std::uint64_t state_;
};

// Classic token bucket: `burst` tokens, refilled at `qps` per second.
class TokenBucket {
 public:
  TokenBucket(double qps, int burst, Clock& clock);
  // Takes a token now if one is available.
  bool TryAcquire();
  // Reserves a token and returns how long the caller must wait before using it (0 if none).
  Duration Reserve();
  // Reserve + SleepFor on the clock. False when stopped first.
  bool Wait(std::stop_token stop = {});

 private:
  void Refill();
  double qps_;
  double burst_;
  Clock& clock_;
  std::mutex mu_;
  double tokens_;
  MonoTime last_;
};

// SplitMix64 step: a tiny PRNG for jitter with a settable start state.
std::uint64_t NextRandom(std::uint64_t& state);
// Uniform double in [0, 1).
double NextUnit(std::uint64_t& state);

}  // namespace gg::k8s
