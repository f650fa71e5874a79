// FleetIndex implementation.
#include "operator/fleet_index.h"

#include <charconv>

namespace gg::op {
namespace {

std::uint64_t RvNum(const std::string& rv) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  return ec == std::errc() && p == rv.data() + rv.size() ? v : 0;
}

bool Excluded(const std::map<std::string, std::string>& labels) {
  auto it = labels.find(api::kExcludeLabel);
  return it != labels.end() && it->second == "true";
}

}  // namespace

RecordSummary Summarize(const std::optional<remediation::RemediationRecord>& r) {
  RecordSummary s;
  if (!r || !r->Active()) return s;
  s.policy = r->policy;
  s.started_at = r->started_at;
  s.dry_run = r->dry_run;
  s.draining = r->drain.phase == remediation::DrainPhase::kRunning && !r->dry_run;
  s.active = !r->dry_run && (r->tainted || r->cordoned || s.draining ||
                             r->drain.phase != remediation::DrainPhase::kNone ||
                             !r->device_taints.empty());
  if (!r->dry_run) {
    for (const auto& d : r->device_taints) s.device_starts.push_back(d.since);
  }
  return s;
}

std::string SelectorFingerprint(const api::LabelSelector& s) {
  std::string out;
  for (const auto& [k, v] : s.match_labels) out += k + "=" + v + ";";
  out += "|";
  for (const auto& e : s.match_expressions) {
    out += e.key + " " + e.op + " (";
    for (const auto& v : e.values) out += v + ",";
    out += ");";
  }
  return out;
}

bool FleetIndex::OnNode(const k8s::Node& node) {
  std::optional<remediation::RemediationRecord> rec;
  if (auto a = node.meta.annotations.Get(api::kRemediationAnnotation)) {
    auto r = remediation::DecodeRecord(*a);
    if (r.ok()) rec = std::move(r).value();
  }
  RecordSummary sum = Summarize(rec);
  std::map<std::string, std::string> labels = node.meta.labels.ToMap();
  std::uint64_t rv = RvNum(node.meta.resource_version);
  std::scoped_lock lock(mu_);
  Entry& e = nodes_[node.meta.name];
  if (rv != 0 && rv < e.own_rv_floor) return false;  // older than what we wrote
  bool changed = false;
  if (e.labels != labels) {
    e.labels = std::move(labels);
    ++label_version_;
    changed = true;
  }
  e.excluded = Excluded(e.labels);
  if (e.record.active != sum.active || e.record.policy != sum.policy ||
      e.record.device_starts.size() != sum.device_starts.size() ||
      e.record.draining != sum.draining) {
    changed = true;
  }
  e.record = sum;
  e.rv = node.meta.resource_version;
  e.rv_num = rv;
  e.own_rv_floor = 0;
  return changed;
}

void FleetIndex::OnNodeDeleted(const std::string& node) {
  std::scoped_lock lock(mu_);
  if (nodes_.erase(node)) ++label_version_;
}

void FleetIndex::ApplyOwnRecord(const std::string& node,
                                const remediation::RemediationRecord& record) {
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  it->second.record = Summarize(record);
  // Deliveries up to the version we wrote over are stale now.
  it->second.own_rv_floor = it->second.rv_num + 1;
}

std::vector<std::string> FleetIndex::SetVerdicts(const std::string& node,
                                                 std::map<std::string, policy::HealthState> states,
                                                 std::string braked_policy) {
  std::vector<std::string> changed;
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return changed;
  Entry& e = it->second;
  for (const auto& [p, s] : states) {
    auto o = e.states.find(p);
    if (o == e.states.end() || o->second != s) changed.push_back(p);
  }
  for (const auto& [p, s] : e.states) {
    if (!states.count(p)) changed.push_back(p);
  }
  if (e.braked_policy != braked_policy) {
    if (!e.braked_policy.empty()) changed.push_back(e.braked_policy);
    if (!braked_policy.empty()) changed.push_back(braked_policy);
  }
  e.states = std::move(states);
  e.braked_policy = std::move(braked_policy);
  return changed;
}

void FleetIndex::SetExcluded(const std::string& node, bool excluded) {
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it != nodes_.end()) it->second.excluded = excluded;
}

int64_t FleetIndex::Matched(const api::LabelSelector& selector) {
  MatchCache& c = match_cache_[SelectorFingerprint(selector)];
  if (c.version != label_version_) {
    c.count = 0;
    for (const auto& [name, e] : nodes_) {
      if (!e.excluded && selector.Matches(e.labels)) ++c.count;
    }
    c.version = label_version_;
  }
  return c.count;
}

remediation::BrakeInput FleetIndex::BrakeInputFor(const std::string& policy,
                                                  const api::LabelSelector& selector) {
  remediation::BrakeInput in;
  std::scoped_lock lock(mu_);
  in.matched_nodes = Matched(selector);
  for (const auto& [name, e] : nodes_) {
    if (!e.record.active || e.record.policy != policy) continue;
    ++in.remediating_nodes;
    if (e.record.started_at) in.node_starts.push_back(*e.record.started_at);
    if (e.record.draining) ++in.active_drains;
    // The brake counts GPUs as well as nodes: every DeviceTaintRule of ours is a device start.
    for (WallTime t : e.record.device_starts) in.device_starts.push_back(t);
  }
  return in;
}

PolicyCounts FleetIndex::CountsFor(const std::string& policy, const api::LabelSelector& selector) {
  PolicyCounts c;
  std::scoped_lock lock(mu_);
  c.matched = Matched(selector);
  for (const auto& [name, e] : nodes_) {
    if (e.excluded) continue;
    if (e.record.active && e.record.policy == policy) ++c.remediating;
    if (e.braked_policy == policy) ++c.braked;
    auto it = e.states.find(policy);
    if (it == e.states.end()) continue;
    switch (it->second) {
      case policy::HealthState::kHealthy: ++c.healthy; break;
      case policy::HealthState::kUnhealthy: ++c.unhealthy; break;
      case policy::HealthState::kUnknown: ++c.unknown; break;
    }
  }
  return c;
}

std::vector<std::string> FleetIndex::MatchingNodes(const api::LabelSelector& selector) {
  std::vector<std::string> out;
  std::scoped_lock lock(mu_);
  for (const auto& [name, e] : nodes_) {
    if (selector.Matches(e.labels)) out.push_back(name);
  }
  return out;
}

std::map<std::string, int64_t> FleetIndex::StateCounts() {
  std::map<std::string, int64_t> out = {
      {"Healthy", 0}, {"Unhealthy", 0}, {"Unknown", 0}, {"Remediating", 0}, {"Excluded", 0}};
  std::scoped_lock lock(mu_);
  for (const auto& [name, e] : nodes_) {
    if (e.excluded) {
      ++out["Excluded"];
      continue;
    }
    if (e.record.active) ++out["Remediating"];
    if (e.states.empty()) continue;
    // The node's worst state across its policies.
    policy::HealthState worst = policy::HealthState::kHealthy;
    for (const auto& [p, s] : e.states) {
      if (s == policy::HealthState::kUnhealthy) worst = s;
      else if (s == policy::HealthState::kUnknown && worst == policy::HealthState::kHealthy) worst = s;
    }
    ++out[std::string(policy::HealthStateName(worst))];
  }
  return out;
}

std::size_t FleetIndex::Size() {
  std::scoped_lock lock(mu_);
  return nodes_.size();
}

}  // namespace gg::op
