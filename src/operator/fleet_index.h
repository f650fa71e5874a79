// FleetIndex: what the operator knows about every node beyond the informer caches, kept
// small and updated incrementally: our remediation record's essentials (parsed once per node
// update, not per decision), the last verdict per selecting policy, and whether the brake held
// the node back. It answers the questions that would otherwise scan the whole fleet on every
// reconcile: how many nodes a policy selects, how many are under remediation, drains running.
//
// Every answer is kept incrementally (counts per policy and state, the set of nodes under
// remediation per policy, the matched count per selector in use): the index is read under its
// lock by every fence decision (the brake) and policy status refresh, and at 100k nodes a
// scan of the fleet per read (~10–100 ms each) held that lock long enough to stall the
// workers and serialize a burst of fences.
//
// Our own writes are applied at once (ApplyOwnRecord) so that the brake stays exact while the
// informer has not yet delivered them; stale informer deliveries (older resourceVersion) are
// ignored.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/gpu_health_policy.h"
#include "common/clock.h"
#include "k8s/objects.h"
#include "policy/evaluate.h"
#include "remediation/brake.h"
#include "remediation/record.h"

namespace gg::op {

struct RecordSummary {
  bool active = false;  // an occurrence with a fence of ours (taint/cordon/drain)
  std::string policy;
  std::optional<WallTime> started_at;
  bool draining = false;  // drain phase Running
  bool dry_run = false;
  bool quarantined = false;             // held as a repeat offender until released by hand
  std::vector<WallTime> device_starts;  // our DeviceTaintRules (DRA), when each was created
};
RecordSummary Summarize(const std::optional<remediation::RemediationRecord>& r);

struct PolicyCounts {
  int64_t matched = 0, healthy = 0, unhealthy = 0, unknown = 0, remediating = 0, braked = 0;
};

// api::LabelSelector::Matches on a packed k8s::LabelMap (no std::map copy of the labels).
bool SelectorMatches(const api::LabelSelector& selector, const k8s::LabelMap& labels);

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
  // Global gauge values: Healthy/Unhealthy/Unknown/Remediating/Excluded, and Quarantined
  // (gpu_guardian_nodes_quarantined).
  std::map<std::string, int64_t> StateCounts();
  std::size_t Size();

 private:
  // The verdicts of one node: (policy id, state) sorted by id. Nodes share them: a fleet
  // has few distinct combinations (all Healthy under the same policies), so an entry holds a
  // pointer into verdict_sets_ instead of a map of policy names.
  struct PolicyState {
    std::uint32_t policy = 0;  // index into policy_names_
    policy::HealthState state = policy::HealthState::kHealthy;
    friend auto operator<=>(const PolicyState&, const PolicyState&) = default;
  };
  using Verdicts = std::vector<PolicyState>;
  // 40 bytes: the record only for nodes that have one (most have none).
  struct Entry {
    k8s::LabelMap labels;
    std::uint64_t rv_num = 0;
    std::unique_ptr<const RecordSummary> record;  // null: the empty summary
    const Verdicts* states = nullptr;             // null: none yet
    std::uint32_t braked_policy = kNoPolicy;      // id, or kNoPolicy
    bool excluded = false;
    const RecordSummary& Record() const { return record ? *record : kNoRecord; }
  };
  static constexpr std::uint32_t kNoPolicy = ~std::uint32_t{0};
  static const RecordSummary kNoRecord;
  struct PolicyAgg {
    PolicyCounts counts;                          // .matched unused here (per selector below)
    std::unordered_set<std::string> remediating;  // nodes with an active record of the policy
  };
  struct MatchCache {
    api::LabelSelector selector;
    int64_t count = 0;
  };
  // Adds (sign +1) or removes (-1) what `e` contributes to the aggregates; every mutation of
  // an entry is bracketed by the two. `labels_too`: also the per-selector matched counts.
  void Contribute(const std::string& name, const Entry& e, int sign, bool labels_too);
  int64_t Matched(const api::LabelSelector& selector);  // requires mu_
  std::uint32_t PolicyId(const std::string& name);      // requires mu_
  const Verdicts* InternVerdicts(Verdicts v);           // requires mu_
  static void SetRecord(Entry& e, RecordSummary sum);

  std::mutex mu_;
  std::unordered_map<std::string, Entry> nodes_;
  // Nodes whose informer deliveries below this resourceVersion are ignored: our write landed
  // and the informer has not delivered it yet (an entry only until it has).
  std::unordered_map<std::string, std::uint64_t> own_rv_floor_;
  std::unordered_map<std::string, PolicyAgg> policies_;
  int64_t healthy_ = 0, unhealthy_ = 0, unknown_ = 0, remediating_ = 0, excluded_ = 0;
  int64_t quarantined_ = 0;
  std::map<std::string, MatchCache> match_cache_;  // by selector fingerprint
  // Policy names by id and ids by name, and the distinct verdict combinations: both only grow
  // (by the policies and states ever seen, a handful), never per node.
  std::vector<std::string> policy_names_;
  std::unordered_map<std::string, std::uint32_t> policy_ids_;
  std::set<Verdicts> verdict_sets_;
};

// Stable text form of a selector (cache key).
std::string SelectorFingerprint(const api::LabelSelector& s);

}  // namespace gg::op
