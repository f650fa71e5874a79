// EvalMemory: the small state Evaluate() carries between evaluations of one node under one
// policy (health state and since when; `for` timers and latched Xid matches per rule+GPU).
// The operator persists it in the node's `gpuguardian.io/remediation` record so decisions
// survive restarts. JSON codec here (compact; unknown fields ignored; garbage -> error).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace gg::policy {

enum class HealthState { kHealthy, kUnhealthy, kUnknown };
std::string_view HealthStateName(HealthState s);  // "Healthy" | "Unhealthy" | "Unknown"
std::optional<HealthState> ParseHealthState(std::string_view s);

// One sample of a counter (rate rules: correctable ECC errors within a window).
struct CounterSample {
  WallTime at{};
  uint64_t value = 0;
  friend bool operator==(const CounterSample&, const CounterSample&) = default;
};

struct MatchMemory {
  std::string rule;
  std::string key;  // GPU UUID, "pci:<bus id>" for an unmapped Xid, "node" for node-level
  // Condition first seen holding (for `for`); the epoch (WallTime{}) when the entry only
  // carries counter samples and the condition does not hold.
  WallTime since{};
  bool latched = false;  // an Xid count rule fired and stays fired while the Xid recurs
  std::vector<CounterSample> samples;  // rate rules, oldest first (at most kMaxCounterSamples)
  bool Holding() const { return since != WallTime{}; }
  friend bool operator==(const MatchMemory&, const MatchMemory&) = default;
};
inline constexpr size_t kMaxCounterSamples = 10;

struct EvalMemory {
  // Last evaluated state and when it began. Absent: never evaluated non-Healthy (a node that
  // was always healthy needs no memory, so no write).
  std::optional<HealthState> state;
  std::optional<WallTime> since;
  std::vector<MatchMemory> matches;  // sorted by (rule, key)
  bool empty() const { return !state && matches.empty(); }
  friend bool operator==(const EvalMemory&, const EvalMemory&) = default;
};

// {"state":"Unhealthy","since":"...","matches":[{"rule":"hot","key":"GPU-..","since":"..","latched":true}]}
std::string EncodeEvalMemory(const EvalMemory& m);
StatusOr<EvalMemory> DecodeEvalMemory(std::string_view json);
// JSON-value forms, for embedding in the remediation record.
void EvalMemoryToJson(const EvalMemory& m, nlohmann::json& out);
StatusOr<EvalMemory> EvalMemoryFromJson(const nlohmann::json& j, const std::string& path);

}  // namespace gg::policy

namespace gg::policy {
// Parses JSON without exceptions, refusing nesting deeper than 32 and inputs over 1 MiB
// (annotations are small; this keeps hostile input cheap). InvalidArgument on garbage.
Status ParseJsonBounded(std::string_view text, nlohmann::json& out);
}  // namespace gg::policy
