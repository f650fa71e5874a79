// FleetIndex implementation.
#include "operator/fleet_index.h"

#include <algorithm>

#include "remediation/plan.h"

namespace gg::op {
namespace {

bool Excluded(const k8s::LabelMap& labels) {
  return remediation::ExcludedByLabel(labels.Get(api::kExcludeLabel));
}

// A policy edit leaves its old selector cached; past this many the cache starts over.
constexpr std::size_t kMaxSelectors = 64;

// Appends the names of the policies whose verdict was added, removed or changed from `was`
// to `now` (null = none; both sorted by policy id).
template <typename Verdicts>
void DiffVerdicts(const Verdicts* was, const Verdicts* now, const std::vector<std::string>& names,
                  std::vector<std::string>* out) {
  static const Verdicts kNone;
  const Verdicts& a = was ? *was : kNone;
  const Verdicts& b = now ? *now : kNone;
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].policy < b[j].policy)) {
      out->push_back(names[a[i++].policy]);
    } else if (i == a.size() || b[j].policy < a[i].policy) {
      out->push_back(names[b[j++].policy]);
    } else {
      if (a[i].state != b[j].state) out->push_back(names[a[i].policy]);
      ++i;
      ++j;
    }
  }
}

}  // namespace

RecordSummary Summarize(const std::optional<remediation::RemediationRecord>& r) {
  RecordSummary s;
  if (!r || !r->Active()) return s;
  s.quarantined = r->quarantined && !r->cancelled;
  s.policy = r->policy;
  s.started_at = r->started_at;
  s.dry_run = r->dry_run;
  s.draining = r->drain.phase == remediation::DrainPhase::kRunning && !r->dry_run;
  s.active = !r->dry_run &&
             (r->tainted || r->cordoned || s.draining ||
              r->drain.phase != remediation::DrainPhase::kNone || !r->device_taints.empty());
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

bool SelectorMatches(const api::LabelSelector& selector, const k8s::LabelMap& labels) {
  return selector.Matches(labels);
}

const RecordSummary FleetIndex::kNoRecord{};

void FleetIndex::SetRecord(Entry& e, RecordSummary sum) {
  const bool empty = !sum.active && sum.policy.empty() && !sum.started_at && !sum.draining &&
                     !sum.dry_run && !sum.quarantined && sum.device_starts.empty();
  if (empty) {
    e.record.reset();
  } else {
    e.record = std::make_unique<const RecordSummary>(std::move(sum));
  }
}

std::uint32_t FleetIndex::PolicyId(const std::string& name) {
  auto [it, inserted] =
      policy_ids_.try_emplace(name, static_cast<std::uint32_t>(policy_names_.size()));
  if (inserted) policy_names_.push_back(name);
  return it->second;
}

const FleetIndex::Verdicts* FleetIndex::InternVerdicts(Verdicts v) {
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  return &*verdict_sets_.insert(std::move(v)).first;
}

void FleetIndex::Contribute(const std::string& name, const Entry& e, int sign, bool labels_too) {
  if (labels_too && !e.excluded) {
    for (auto& [_, c] : match_cache_) {
      if (SelectorMatches(c.selector, e.labels)) c.count += sign;
    }
  }
  const RecordSummary& rec = e.Record();
  // The brake counts our fences even on a node an admin has excluded since.
  if (rec.active) {
    auto& set = policies_[rec.policy].remediating;
    if (sign > 0) {
      set.insert(name);
    } else {
      set.erase(name);
    }
  }
  if (rec.quarantined) quarantined_ += sign;
  if (e.excluded) {
    excluded_ += sign;
    return;
  }
  if (rec.active) {
    remediating_ += sign;
    policies_[rec.policy].counts.remediating += sign;
  }
  if (e.braked_policy != kNoPolicy) policies_[policy_names_[e.braked_policy]].counts.braked += sign;
  if (!e.states) return;
  policy::HealthState worst = policy::HealthState::kHealthy;
  for (const auto& [p, st] : *e.states) {
    PolicyCounts& c = policies_[policy_names_[p]].counts;
    switch (st) {
      case policy::HealthState::kHealthy:
        c.healthy += sign;
        break;
      case policy::HealthState::kUnhealthy:
        c.unhealthy += sign;
        break;
      case policy::HealthState::kUnknown:
        c.unknown += sign;
        break;
    }
    // The node's worst state across its policies, for the global gauge.
    if (st == policy::HealthState::kUnhealthy)
      worst = st;
    else if (st == policy::HealthState::kUnknown && worst == policy::HealthState::kHealthy)
      worst = st;
  }
  switch (worst) {
    case policy::HealthState::kHealthy:
      healthy_ += sign;
      break;
    case policy::HealthState::kUnhealthy:
      unhealthy_ += sign;
      break;
    case policy::HealthState::kUnknown:
      unknown_ += sign;
      break;
  }
}

bool FleetIndex::OnNode(const k8s::Node& node) {
  std::optional<remediation::RemediationRecord> rec;
  if (auto a = node.meta.annotations.Get(api::kRemediationAnnotation)) {
    auto r = remediation::DecodeRecord(*a);
    if (r.ok()) rec = std::move(r).value();
  }
  RecordSummary sum = Summarize(rec);
  std::uint64_t rv = k8s::ResourceVersionNumber(node.meta.resource_version);
  std::scoped_lock lock(mu_);
  auto [it, inserted] = nodes_.try_emplace(node.meta.name);
  Entry& e = it->second;
  if (auto fl = own_rv_floor_.find(node.meta.name); fl != own_rv_floor_.end()) {
    if (rv != 0 && rv < fl->second) return false;  // older than what we wrote
    own_rv_floor_.erase(fl);
  }
  const bool labels_changed = inserted || !(e.labels == node.meta.labels);
  if (!inserted) Contribute(it->first, e, -1, labels_changed);
  bool changed = labels_changed;
  if (labels_changed) e.labels = node.meta.labels;
  e.excluded = Excluded(e.labels);
  const RecordSummary& was = e.Record();
  if (was.active != sum.active || was.policy != sum.policy ||
      was.device_starts.size() != sum.device_starts.size() || was.draining != sum.draining) {
    changed = true;
  }
  SetRecord(e, std::move(sum));
  e.rv_num = rv;
  Contribute(it->first, e, +1, labels_changed);
  return changed;
}

void FleetIndex::OnNodeDeleted(const std::string& node) {
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  Contribute(it->first, it->second, -1, true);
  nodes_.erase(it);
  own_rv_floor_.erase(node);
}

void FleetIndex::ApplyOwnRecord(const std::string& node,
                                const remediation::RemediationRecord& record) {
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  Contribute(it->first, it->second, -1, false);
  SetRecord(it->second, Summarize(record));
  // Deliveries up to the version we wrote over are stale now.
  own_rv_floor_[node] = it->second.rv_num + 1;
  Contribute(it->first, it->second, +1, false);
}

std::vector<std::string> FleetIndex::SetVerdicts(const std::string& node,
                                                 std::map<std::string, policy::HealthState> states,
                                                 std::string braked_policy) {
  std::vector<std::string> changed;
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return changed;
  Entry& e = it->second;
  Verdicts now;
  now.reserve(states.size());
  for (const auto& [p, s] : states) now.push_back({PolicyId(p), s});
  const Verdicts* interned = InternVerdicts(std::move(now));
  const std::uint32_t braked = braked_policy.empty() ? kNoPolicy : PolicyId(braked_policy);
  if (interned != e.states) DiffVerdicts(e.states, interned, policy_names_, &changed);
  if (e.braked_policy != braked) {
    if (e.braked_policy != kNoPolicy) changed.push_back(policy_names_[e.braked_policy]);
    if (braked != kNoPolicy) changed.push_back(braked_policy);
  }
  if (changed.empty()) return changed;
  Contribute(it->first, e, -1, false);
  e.states = interned;
  e.braked_policy = braked;
  Contribute(it->first, e, +1, false);
  return changed;
}

void FleetIndex::SetExcluded(const std::string& node, bool excluded) {
  std::scoped_lock lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.excluded == excluded) return;
  Contribute(it->first, it->second, -1, true);
  it->second.excluded = excluded;
  Contribute(it->first, it->second, +1, true);
}

int64_t FleetIndex::Matched(const api::LabelSelector& selector) {
  std::string fp = SelectorFingerprint(selector);
  auto it = match_cache_.find(fp);
  if (it != match_cache_.end()) return it->second.count;
  if (match_cache_.size() >= kMaxSelectors) match_cache_.clear();
  // First use of this selector: one scan, then kept current by Contribute.
  MatchCache c{selector, 0};
  for (const auto& [name, e] : nodes_) {
    if (!e.excluded && SelectorMatches(selector, e.labels)) ++c.count;
  }
  return match_cache_.emplace(std::move(fp), std::move(c)).first->second.count;
}

remediation::BrakeInput FleetIndex::BrakeInputFor(const std::string& policy,
                                                  const api::LabelSelector& selector) {
  remediation::BrakeInput in;
  std::scoped_lock lock(mu_);
  in.matched_nodes = Matched(selector);
  auto p = policies_.find(policy);
  if (p == policies_.end()) return in;
  for (const auto& name : p->second.remediating) {
    const RecordSummary& rec = nodes_.at(name).Record();
    ++in.remediating_nodes;
    if (rec.started_at) in.node_starts.push_back(*rec.started_at);
    if (rec.draining) ++in.active_drains;
    // The brake counts GPUs as well as nodes: every DeviceTaintRule of ours is a device start.
    for (WallTime t : rec.device_starts) in.device_starts.push_back(t);
  }
  return in;
}

PolicyCounts FleetIndex::CountsFor(const std::string& policy, const api::LabelSelector& selector) {
  std::scoped_lock lock(mu_);
  PolicyCounts c;
  if (auto p = policies_.find(policy); p != policies_.end()) c = p->second.counts;
  c.matched = Matched(selector);
  return c;
}

std::vector<std::string> FleetIndex::MatchingNodes(const api::LabelSelector& selector) {
  std::vector<std::string> out;
  std::scoped_lock lock(mu_);
  for (const auto& [name, e] : nodes_) {
    if (SelectorMatches(selector, e.labels)) out.push_back(name);
  }
  return out;
}

std::map<std::string, int64_t> FleetIndex::StateCounts() {
  std::scoped_lock lock(mu_);
  return {{"Healthy", healthy_},         {"Unhealthy", unhealthy_}, {"Unknown", unknown_},
          {"Remediating", remediating_}, {"Excluded", excluded_},   {"Quarantined", quarantined_}};
}

std::size_t FleetIndex::Size() {
  std::scoped_lock lock(mu_);
  return nodes_.size();
}

}  // namespace gg::op
