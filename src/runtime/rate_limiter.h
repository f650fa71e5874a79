// Rate limiters deciding how long a failed work item waits before it is retried, with
// client-go's semantics: per-item exponential backoff, an overall token bucket, and the
// max of several. DefaultControllerRateLimiter = max(exp 5 ms -> 1000 s, bucket 10 qps/100).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"

namespace gg::runtime {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // How long `key` should wait now; counts one more failure for per-item limiters.
  virtual Duration When(const std::string& key) = 0;
  // Stops tracking `key` (success): its backoff starts over next time.
  virtual void Forget(const std::string& key) = 0;
  // Failures counted for `key` since the last Forget.
  virtual int NumRequeues(const std::string& key) = 0;
};

// base * 2^failures, capped at max_delay. Thread-safe.
class ItemExponentialFailureRateLimiter final : public RateLimiter {
 public:
  ItemExponentialFailureRateLimiter(Duration base_delay, Duration max_delay);
  Duration When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) override;

 private:
  const Duration base_;
  const Duration max_;
  std::mutex mu_;
  std::unordered_map<std::string, int> failures_;
};

// An overall token bucket (golang.org/x/time/rate "reserve" semantics): `burst` tokens,
// refilled at `qps`; each When() takes one token and returns the wait until it is available.
// Not per item: NumRequeues is always 0 and Forget does nothing. Uses the clock's
// monotonic time, so FakeClock tests are exact.
class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(Clock& clock, double qps, int burst);
  Duration When(const std::string& key) override;
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  Clock& clock_;
  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  MonoTime last_;
};

// The longest wait of all its limiters.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  Duration When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

inline constexpr Duration kDefaultBaseDelay = std::chrono::milliseconds(5);
inline constexpr Duration kDefaultMaxDelay = std::chrono::seconds(1000);
inline constexpr double kDefaultQps = 10;
inline constexpr int kDefaultBurst = 100;

// max(ItemExponentialFailure(5 ms, 1000 s), Bucket(10 qps, burst 100)).
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock& clock);

}  // namespace gg::runtime
