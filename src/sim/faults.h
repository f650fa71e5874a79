// FaultInjector: the simulator's fault injection (latency, error rates per verb/resource,
// outage windows, watch cuts, forced 410s, slow bodies), set in-process or through
// POST /_sim/faults with a JSON body:
//   {"rules":[{"verb":"patch","resource":"nodes","errorRate":1,"code":503,
//              "retryAfterSeconds":1,"latencyMs":0,"count":2}],
//    "outageSeconds":5,"watchCutAfterEvents":10,"forceWatch410":1,"slowBodyBytesPerSec":0}
#pragma once

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>

#include "common/status.h"
#include "sim/api_error.h"
#include "sim/server.h"

namespace gg::sim {

struct FaultDecision {
  std::chrono::milliseconds latency{0};
  std::optional<ApiError> error;
};

class FaultInjector {
 public:
  void Set(FaultConfig f);
  void Clear();
  Status SetFromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;
  // verb/resource empty for non-resource paths (then only outages apply).
  FaultDecision Decide(const std::string& verb, const std::string& resource);
  int WatchCutAfter() const;
  bool TakeForced410();
  std::size_t SlowBodyRate() const;

 private:
  mutable std::mutex mu_;
  FaultConfig f_;
  std::mt19937_64 rng_{12345};
};

}  // namespace gg::sim
