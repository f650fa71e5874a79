// Rate limiters: per-item exponential backoff, token bucket, max-of.
#include "runtime/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace gg::runtime {

ItemExponentialFailureRateLimiter::ItemExponentialFailureRateLimiter(Duration base_delay,
                                                                     Duration max_delay)
    : base_(base_delay), max_(max_delay) {}

Duration ItemExponentialFailureRateLimiter::When(const std::string& key) {
  int exp;
  {
    std::scoped_lock lock(mu_);
    exp = failures_[key]++;
  }
  // Computed in floating point so a large exponent saturates instead of overflowing.
  double backoff = static_cast<double>(base_.count()) * std::pow(2.0, exp);
  if (!(backoff < static_cast<double>(max_.count()))) return max_;
  return Duration(static_cast<Duration::rep>(backoff));
}

void ItemExponentialFailureRateLimiter::Forget(const std::string& key) {
  std::scoped_lock lock(mu_);
  failures_.erase(key);
}

int ItemExponentialFailureRateLimiter::NumRequeues(const std::string& key) {
  std::scoped_lock lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

BucketRateLimiter::BucketRateLimiter(Clock& clock, double qps, int burst)
    : clock_(clock),
      qps_(qps > 0 ? qps : 1e-9),
      burst_(std::max(1, burst)),
      tokens_(burst_),
      last_(clock.Monotonic()) {}

Duration BucketRateLimiter::When(const std::string&) {
  std::scoped_lock lock(mu_);
  MonoTime now = clock_.Monotonic();
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  // Reserve one token; a negative balance is the wait until it is refilled.
  tokens_ -= 1;
  if (tokens_ >= 0) return Duration(0);
  double wait_ns = -tokens_ / qps_ * 1e9;
  return Duration(static_cast<Duration::rep>(std::llround(wait_ns)));
}

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

Duration MaxOfRateLimiter::When(const std::string& key) {
  Duration out(0);
  for (auto& l : limiters_) out = std::max(out, l->When(key));
  return out;
}

void MaxOfRateLimiter::Forget(const std::string& key) {
  for (auto& l : limiters_) l->Forget(key);
}

int MaxOfRateLimiter::NumRequeues(const std::string& key) {
  int out = 0;
  for (auto& l : limiters_) out = std::max(out, l->NumRequeues(key));
  return out;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> v;
  v.push_back(
      std::make_unique<ItemExponentialFailureRateLimiter>(kDefaultBaseDelay, kDefaultMaxDelay));
  v.push_back(std::make_unique<BucketRateLimiter>(clock, kDefaultQps, kDefaultBurst));
  return std::make_unique<MaxOfRateLimiter>(std::move(v));
}

}  // namespace gg::runtime
