// FleetIndex: what the operator knows about every node beyond the informer caches, kept
// small and updated incrementally: our remediation record's essentials (parsed once per node
// update, not per decision), the last verdict per selecting policy, and whether the brake held
// the node back. It answers the questions that would otherwise scan the whole fleet on every
// reconcile: how many nodes a policy selects, how many are under remediation, drains running.
//
// Our own writes are applied at once (ApplyOwnRecord) so that the brake stays exact while the
// informer has not yet delivered them; stale informer deliveries (older resourceVersion) are
// ignored.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "k8s/objects.h"
#include "policy/evaluate.h"
#include "remediation/brake.h"
#include "remediation/record.h"

namespace gg::op {

struct RecordSummary {
  bool active = false;        // an occurrence with a fence of ours (taint/cordon/drain)
  std::string policy;
  std::optional<WallTime> started_at;
  bool draining = false;      // drain phase Running
  bool dry_run = false;
  std::vector<WallTime> device_starts;  // our DeviceTaintRules (DRA), when each was created
};
RecordSummary Summarize(const std::optional<remediation::RemediationRecord>& r);

struct PolicyCounts {
  int64_t matched = 0, healthy = 0, unhealthy = 0, unknown = 0, remediating = 0, braked = 0;
};

class FleetIndex {
 public:
  // From the node informer (add/update). Returns true when something that matters to
  // other nodes' decisions changed (labels, record) — callers may then re-enqueue policies.
  bool OnNode(const k8s::Node& node);
  void OnNodeDeleted(const std::string& node);
  // After our own successful write of `record` (resourceVersion of the response if known).
  void ApplyOwnRecord(const std::string& node, const remediation::RemediationRecord& record);

  // The verdicts the reconciler computed for `node` (policy → state), and whether the brake
  // held it back. Returns the policies whose counts changed.
  std::vector<std::string> SetVerdicts(const std::string& node,
                                       std::map<std::string, policy::HealthState> states,
                                       std::string braked_policy);
  void SetExcluded(const std::string& node, bool excluded);

  // Brake input for `policy` (matched = nodes `selector` selects, excluding opted-out ones).
  remediation::BrakeInput BrakeInputFor(const std::string& policy,
                                        const api::LabelSelector& selector);
  PolicyCounts CountsFor(const std::string& policy, const api::LabelSelector& selector);
  // Nodes the selector matches (names).
  std::vector<std::string> MatchingNodes(const api::LabelSelector& selector);
  // Global gauge values: Healthy/Unhealthy/Unknown/Remediating/Excluded.
  std::map<std::string, int64_t> StateCounts();
  std::size_t Size();

 private:
  struct Entry {
    std::map<std::string, std::string> labels;
    std::string rv;
    std::uint64_t rv_num = 0;
    RecordSummary record;
    std::uint64_t own_rv_floor = 0;  // ignore informer deliveries below this (our write landed)
    std::map<std::string, policy::HealthState> states;
    std::string braked_policy;
    bool excluded = false;
  };
  int64_t Matched(const api::LabelSelector& selector);  // requires mu_

  std::mutex mu_;
  std::unordered_map<std::string, Entry> nodes_;
  std::uint64_t label_version_ = 0;
  struct MatchCache {
    std::uint64_t version = ~0ull;
    int64_t count = 0;
  };
  std::map<std::string, MatchCache> match_cache_;  // by selector fingerprint
};

// Stable text form of a selector (cache key).
std::string SelectorFingerprint(const api::LabelSelector& s);

}  // namespace gg::op
