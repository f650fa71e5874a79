// Fault injection rules and their JSON control form.
#include "sim/faults.h"

namespace gg::sim {

using nlohmann::json;

void FaultInjector::Set(FaultConfig f) {
  std::scoped_lock lock(mu_);
  f_ = std::move(f);
}

void FaultInjector::Clear() { Set(FaultConfig{}); }

Status FaultInjector::SetFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgumentError("faults body must be a JSON object");
  FaultConfig f;
  try {
    for (const auto& r : j.value("rules", json::array())) {
      FaultRule fr;
      fr.verb = r.value("verb", "");
      fr.resource = r.value("resource", "");
      fr.error_rate = r.value("errorRate", 0.0);
      fr.error_code = r.value("code", 500);
      fr.retry_after_seconds = r.value("retryAfterSeconds", 0);
      fr.latency = std::chrono::milliseconds(r.value("latencyMs", 0));
      fr.remaining = r.value("count", -1);
      if (fr.error_rate < 0 || fr.error_rate > 1)
        return InvalidArgumentError("errorRate must be within [0,1]");
      f.rules.push_back(fr);
    }
    double outage = j.value("outageSeconds", 0.0);
    if (outage > 0)
      f.outage_until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<long>(outage * 1000));
    f.watch_cut_after_events = j.value("watchCutAfterEvents", 0);
    f.force_watch_410 = j.value("forceWatch410", 0);
    f.slow_body_bytes_per_sec = j.value("slowBodyBytesPerSec", 0);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("bad faults body: ") + e.what());
  }
  Set(std::move(f));
  return OkStatus();
}

json FaultInjector::ToJson() const {
  std::scoped_lock lock(mu_);
  json rules = json::array();
  for (const auto& r : f_.rules)
    rules.push_back({{"verb", r.verb},
                     {"resource", r.resource},
                     {"errorRate", r.error_rate},
                     {"code", r.error_code},
                     {"retryAfterSeconds", r.retry_after_seconds},
                     {"latencyMs", r.latency.count()},
                     {"count", r.remaining}});
  auto left = f_.outage_until - std::chrono::steady_clock::now();
  double outage = left.count() > 0 ? std::chrono::duration<double>(left).count() : 0.0;
  return {{"rules", rules},
          {"outageSeconds", outage},
          {"watchCutAfterEvents", f_.watch_cut_after_events},
          {"forceWatch410", f_.force_watch_410},
          {"slowBodyBytesPerSec", f_.slow_body_bytes_per_sec}};
}

FaultDecision FaultInjector::Decide(const std::string& verb, const std::string& resource) {
  FaultDecision d;
  std::scoped_lock lock(mu_);
  if (std::chrono::steady_clock::now() < f_.outage_until) {
    d.error = StatusCodeErr(503);
    d.error->retry_after_seconds = 1;
    return d;
  }
  if (verb.empty()) return d;
  for (auto& r : f_.rules) {
    if (!r.verb.empty() && r.verb != verb) continue;
    if (!r.resource.empty() && r.resource != resource &&
        r.resource != resource.substr(0, resource.find('/')))
      continue;
    if (r.remaining == 0) continue;
    bool fire =
        r.error_rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < r.error_rate;
    if (r.latency.count() > 0) d.latency += r.latency;
    if (fire) {
      if (r.remaining > 0) --r.remaining;
      d.error = StatusCodeErr(r.error_code);
      d.error->retry_after_seconds = r.retry_after_seconds;
      return d;
    }
    if (r.latency.count() > 0 && r.remaining > 0 && r.error_rate == 0) --r.remaining;
  }
  return d;
}

int FaultInjector::WatchCutAfter() const {
  std::scoped_lock lock(mu_);
  return f_.watch_cut_after_events;
}

bool FaultInjector::TakeForced410() {
  std::scoped_lock lock(mu_);
  if (f_.force_watch_410 <= 0) return false;
  --f_.force_watch_410;
  return true;
}

std::size_t FaultInjector::SlowBodyRate() const {
  std::scoped_lock lock(mu_);
  return f_.slow_body_bytes_per_sec;
}

}  // namespace gg::sim
