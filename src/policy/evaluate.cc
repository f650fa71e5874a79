// Evaluate(): rules over one node's report -> Verdict. See evaluate.h and docs/policy.md.
#include "policy/evaluate.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "common/time_util.h"
#include "gpu/xid_catalog.h"

namespace gg::policy {
namespace {

using api::Action;
using api::GpuStatus;
using api::Rule;

constexpr size_t kMaxMessage = 1024;  // Kubernetes condition messages stay readable

std::string GpuLabel(const GpuStatus& g) {
  return "GPU " + std::to_string(g.index) + " (" + (g.uuid.empty() ? "no UUID" : g.uuid) + ")";
}

// "00000000:3B:00.0" and "0000:3b:00.0" -> "0000:3b:00.0".
std::string NormalizeBusId(std::string_view s) {
  std::string out;
  for (char c : s) out += char(std::tolower(static_cast<unsigned char>(c)));
  auto colon = out.find(':');
  if (colon != std::string::npos && colon > 4) out.erase(0, colon - 4);
  return out;
}

template <typename T>
bool Contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// A key into the per-rule match state: one GPU, or something node-level.
struct Target {
  std::string key;  // uuid | "pci:<bus>" | "node"
  int index = -1;
  std::string uuid;
  std::string label;  // "GPU 3 (GPU-...)" | "node" | "unmapped GPU at 0000:3b:00.0"
};

struct Condition {
  bool holds = false;
  std::optional<WallTime> since;  // when the condition began, if the source says (Node conditions)
  std::string detail;             // what holds, e.g. "temperature 91C > 85C"
  bool node_wide = false;
  std::optional<WallTime> expires;     // Xid rules: when the newest occurrence leaves the window
  bool recent_in_window = false;       // Xid rules: some matching occurrence is inside the window
  std::vector<CounterSample> samples;  // rate rules: the counter's samples to keep in memory
  std::set<MigInstance> mig;  // Xid rules: MIG instances the matching Xids were confined to
  bool whole_gpu = false;     // some matching Xid concerns the whole GPU
};

template <typename N>
std::string Num(N n) {
  return std::to_string(n);
}

std::string Watts(double w) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f W", w);
  return buf;
}

// Power draw over the enforced limit (plus the rule's margin).
void PowerParts(const api::PowerMatcher& m, const GpuStatus& g, std::vector<std::string>& parts) {
  if (!g.power_watts || !g.power_limit_watts || *g.power_limit_watts <= 0) return;
  const double allowed = *g.power_limit_watts * (100.0 + m.over_limit_percent) / 100.0;
  if (*g.power_watts <= allowed) return;
  parts.push_back("power " + Watts(*g.power_watts) + " > enforced limit " +
                  Watts(*g.power_limit_watts) +
                  (m.over_limit_percent ? " + " + Num(m.over_limit_percent) + "%" : ""));
}

// ECC counters over the rule's thresholds (one part per exceeded counter).
void EccParts(const api::EccMatcher& m, const GpuStatus& g, std::vector<std::string>& parts) {
  if (m.uncorrectable_volatile_above && g.ecc_uncorrected_volatile &&
      *g.ecc_uncorrected_volatile > *m.uncorrectable_volatile_above) {
    parts.push_back("uncorrectable ECC errors (volatile) " + Num(*g.ecc_uncorrected_volatile) +
                    " > " + Num(*m.uncorrectable_volatile_above));
  }
  if (m.correctable_volatile_above && g.ecc_corrected_volatile &&
      *g.ecc_corrected_volatile > *m.correctable_volatile_above) {
    parts.push_back("correctable ECC errors (volatile) " + Num(*g.ecc_corrected_volatile) + " > " +
                    Num(*m.correctable_volatile_above));
  }
  if (m.uncorrectable_aggregate_above && g.ecc_uncorrected_aggregate &&
      *g.ecc_uncorrected_aggregate > *m.uncorrectable_aggregate_above) {
    parts.push_back("uncorrectable ECC errors (aggregate) " + Num(*g.ecc_uncorrected_aggregate) +
                    " > " + Num(*m.uncorrectable_aggregate_above));
  }
}

// Row remapping and page retirement (the two memory-repair mechanisms).
void MemoryRepairParts(const Rule& r, const GpuStatus& g, std::vector<std::string>& parts) {
  if (r.remapped_rows) {
    const auto& m = *r.remapped_rows;
    if (m.failure && g.remap_failure) parts.push_back("row remapping failure");
    if (m.pending && g.remap_pending) parts.push_back("row remapping pending (GPU reset needed)");
    if (m.uncorrectable_above && g.remapped_rows_uncorrectable &&
        *g.remapped_rows_uncorrectable > *m.uncorrectable_above) {
      parts.push_back("rows remapped for uncorrectable errors " +
                      Num(*g.remapped_rows_uncorrectable) + " > " + Num(*m.uncorrectable_above));
    }
  }
  if (r.retired_pages) {
    const auto& m = *r.retired_pages;
    if (m.pending && g.retired_pages_pending) parts.push_back("page retirement pending");
    if (m.dbe_above && g.retired_pages_dbe && *g.retired_pages_dbe > *m.dbe_above) {
      parts.push_back("pages retired for DBE " + Num(*g.retired_pages_dbe) + " > " +
                      Num(*m.dbe_above));
    }
    if (m.sbe_above && g.retired_pages_sbe && *g.retired_pages_sbe > *m.sbe_above) {
      parts.push_back("pages retired for SBE " + Num(*g.retired_pages_sbe) + " > " +
                      Num(*m.sbe_above));
    }
  }
}

Condition LevelCondition(const Rule& r, const GpuStatus& g) {
  Condition c;
  std::vector<std::string> parts;
  if (r.gpu_lost && g.lost) {
    parts.push_back("GPU lost (fallen off the bus or not responding)");
    c.node_wide = true;
  }
  if (r.ecc) EccParts(*r.ecc, g, parts);
  MemoryRepairParts(r, g, parts);
  if (r.thermal) {
    const auto& m = *r.thermal;
    if (m.temperature_above_celsius && g.temperature_c &&
        *g.temperature_c > *m.temperature_above_celsius) {
      parts.push_back("temperature " + Num(*g.temperature_c) + "C > " +
                      Num(*m.temperature_above_celsius) + "C");
    }
    for (const auto& reason : m.throttle_reasons) {
      if (Contains(g.throttle_reasons, reason)) parts.push_back("throttled: " + reason);
    }
  }
  if (r.nvlink) {
    const auto& m = *r.nvlink;
    if (m.links_down_above && g.nvlink_links_down && *g.nvlink_links_down > *m.links_down_above) {
      std::string total = g.nvlink_links_total ? " of " + Num(*g.nvlink_links_total) : "";
      parts.push_back("NVLink links down " + Num(*g.nvlink_links_down) + total + " > " +
                      Num(*m.links_down_above));
      c.node_wide = true;
    }
    if (m.errors_above && g.nvlink_error_count && *g.nvlink_error_count > *m.errors_above) {
      parts.push_back("NVLink errors " + Num(*g.nvlink_error_count) + " > " + Num(*m.errors_above));
      c.node_wide = true;
    }
  }
  if (r.power) PowerParts(*r.power, g, parts);
  if (r.pcie_replay_above && g.pcie_replay_count && *g.pcie_replay_count > *r.pcie_replay_above) {
    parts.push_back("PCIe replays " + Num(*g.pcie_replay_count) + " > " +
                    Num(*r.pcie_replay_above));
  }
  if (!r.recovery_actions.empty() && !g.recovery_action.empty() &&
      Contains(r.recovery_actions, g.recovery_action)) {
    parts.push_back("driver recovery action " + g.recovery_action);
    if (g.recovery_action == "NodeReboot" || g.recovery_action == "DrainP2P") c.node_wide = true;
  }
  c.holds = !parts.empty();
  for (size_t i = 0; i < parts.size(); ++i) c.detail += (i ? ", " : "") + parts[i];
  return c;
}

bool XidMatches(const api::XidMatcher& m, const api::XidEvent& e) {
  if (e.sxid != m.sxid) return false;
  if (Contains(m.ignore, e.xid)) return false;  // ignore always wins
  return Contains(m.codes, e.xid) ||
         (!e.recommended_action.empty() && Contains(m.catalog_actions, e.recommended_action));
}

// NVSwitch SXids affect every GPU behind the switch; Xid facts come from the catalog.
bool XidNodeWide(const api::XidEvent& e) {
  return e.sxid || gpu::XidNeedsWholeNode(e.xid, e.recommended_action);
}

// The Xid hit one MIG instance only: the driver named a GPU instance and the Xid's recovery
// does not reset the GPU (a reset, reboot or NVLink workflow ends every instance on it).
bool XidConfinedToInstance(const api::XidEvent& e) {
  if (!e.gpu_instance || XidNodeWide(e)) return false;
  std::optional<gpu::XidAction> a = gpu::ParseXidAction(e.recommended_action);
  if (!a) {
    const gpu::XidInfo* info = gpu::XidCatalog::Builtin().Find(e.xid);
    if (info) a = info->action;
  }
  return a && *a < gpu::XidAction::kDrainP2P;
}

struct EvalContext {
  const api::GpuHealthPolicySpec& spec;
  const api::GpuNodeHealthStatus& report;
  const EvalMemory& prior;
  WallTime now;
  const std::vector<NodeConditionFact>& node_conditions;
  bool clock_skew = false;
};

WallTime Clamp(EvalContext& ctx, WallTime t) {
  if (t > ctx.now) {
    ctx.clock_skew = true;
    return ctx.now;
  }
  return t;
}

// Xid rule over the report's aggregated ring, grouped per target. Counting (docs/policy.md):
// an entry whose lastSeen is before now-window contributes 0; one whose firstSeen is inside
// the window contributes its full count; one straddling the window start contributes 1 (only
// its latest occurrence is known to be inside). Without a window every entry counts fully.
std::map<std::string, std::pair<Target, Condition>> XidConditions(EvalContext& ctx, const Rule& r) {
  std::map<std::string, std::pair<Target, Condition>> out;
  std::map<std::string, int64_t> counts;
  std::map<std::string, std::vector<std::string>> parts;
  std::optional<WallTime> cutoff;
  if (r.window) cutoff = ctx.now - *r.window;
  for (const auto& e : ctx.report.xids) {
    if (!XidMatches(*r.xid, e)) continue;
    WallTime last = Clamp(ctx, e.last_seen);
    WallTime first = std::min(Clamp(ctx, e.first_seen), last);
    if (cutoff && last < *cutoff) continue;
    int64_t n = std::max<int64_t>(e.count, 1);
    if (cutoff && first < *cutoff) n = 1;

    Target t;
    const GpuStatus* gpu = nullptr;
    for (const auto& g : ctx.report.gpus) {
      if ((!e.gpu_uuid.empty() && g.uuid == e.gpu_uuid) ||
          (e.gpu_uuid.empty() && !e.pci_bus_id.empty() &&
           NormalizeBusId(g.pci_bus_id) == NormalizeBusId(e.pci_bus_id))) {
        gpu = &g;
        break;
      }
    }
    bool unmapped = false;
    if (gpu) {
      t = Target{gpu->uuid.empty() ? "index:" + Num(gpu->index) : gpu->uuid, gpu->index, gpu->uuid,
                 GpuLabel(*gpu)};
    } else if (!e.gpu_uuid.empty()) {
      t = Target{e.gpu_uuid, -1, e.gpu_uuid, "GPU " + e.gpu_uuid};
    } else if (!e.pci_bus_id.empty()) {
      t = Target{"pci:" + NormalizeBusId(e.pci_bus_id), -1, "",
                 "unmapped GPU at " + NormalizeBusId(e.pci_bus_id)};
      unmapped = true;
    } else {
      t = Target{"node", -1, "", "node"};
      unmapped = true;
    }
    auto& slot = out[t.key];
    slot.first = t;
    Condition& c = slot.second;
    c.recent_in_window = true;
    if (unmapped || XidNodeWide(e)) c.node_wide = true;
    if (XidConfinedToInstance(e)) {
      c.mig.insert(MigInstance{*e.gpu_instance, e.compute_instance});
    } else {
      c.whole_gpu = true;
    }
    if (r.window) {
      WallTime exp = last + *r.window;
      if (!c.expires || exp > *c.expires) c.expires = exp;
    }
    counts[t.key] += n;
    std::string name(gpu::XidShortName(e.xid));
    std::string desc = name.empty() ? e.category : name;
    if (!e.recommended_action.empty()) desc += (desc.empty() ? "" : ", ") + e.recommended_action;
    parts[t.key].push_back(std::string(e.sxid ? "SXid " : "Xid ") + Num(e.xid) +
                           (desc.empty() ? "" : " (" + desc + ")") + " x" + Num(n));
  }
  for (auto& [key, slot] : out) {
    Condition& c = slot.second;
    c.holds = counts[key] >= r.count;
    for (size_t i = 0; i < parts[key].size(); ++i) c.detail += (i ? ", " : "") + parts[key][i];
    if (r.window) c.detail += " in " + FormatDuration(*r.window);
    if (r.count > 1) c.detail += " (" + Num(counts[key]) + " >= " + Num(r.count) + ")";
  }
  return out;
}

const MatchMemory* FindMatch(const EvalMemory& m, const std::string& rule, const std::string& key) {
  for (const auto& mm : m.matches) {
    if (mm.rule == rule && mm.key == key) return &mm;
  }
  return nullptr;
}

void Truncate(std::string& s) {
  if (s.size() > kMaxMessage) {
    s.resize(kMaxMessage - 3);
    // Do not cut a UTF-8 sequence in half.
    while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
    if (!s.empty() && (static_cast<unsigned char>(s.back()) & 0x80)) s.pop_back();
    s += "...";
  }
}

void Consider(std::optional<WallTime>& next, WallTime t, WallTime now) {
  if (t <= now) return;
  if (!next || t < *next) next = t;
}

void FinishUnknown(Verdict& v, const api::GpuHealthPolicySpec& spec, UnknownCause cause,
                   std::string message) {
  v.state = HealthState::kUnknown;
  v.unknown_cause = cause;
  v.action = spec.unknown.action;
  v.reason = std::string(UnknownCauseName(cause));
  v.message = std::move(message);
}

// Whether every source / some source says Unavailable.
struct SourceHealth {
  bool any_unavailable = false;
  bool all_unavailable = false;
};
SourceHealth SourcesOf(const api::GpuNodeHealthStatus& report) {
  SourceHealth h;
  h.all_unavailable = !report.sources.empty();
  for (const auto& s : report.sources) {
    if (s.state == api::SourceState::kUnavailable) {
      h.any_unavailable = true;
    } else {
      h.all_unavailable = false;
    }
  }
  return h;
}

// The counter's samples after seeing `value` at `now`, for an increase over `window`: a first
// non-zero value starts them; a value below the last means the counter was reset (driver
// reload) and starts over; a larger value is kept when the last sample is at least window/8
// old. Only the newest sample at or before now-window (the baseline) and the younger ones stay.
std::vector<CounterSample> UpdateSamples(std::vector<CounterSample> s, uint64_t value, WallTime now,
                                         Duration window) {
  if (s.empty()) {
    if (value > 0) s.push_back({now, value});
    return s;
  }
  if (value < s.back().value) return {{now, value}};
  if (value > s.back().value && now - s.back().at >= window / 8) s.push_back({now, value});
  const WallTime cutoff = now - window;
  while (s.size() > 1 && (s[1].at <= cutoff || s.size() > kMaxCounterSamples)) s.erase(s.begin());
  return s;
}

// ecc.correctableVolatileIncreaseAbove: new correctable errors within the window, the current
// counter against the baseline sample (docs/policy.md, "Rates").
void EccRate(EvalContext& ctx, const Rule& r, const GpuStatus& g, const std::string& key,
             Condition& c) {
  if (!g.ecc_corrected_volatile || !r.window) return;
  const MatchMemory* mem = FindMatch(ctx.prior, r.name, key);
  c.samples = UpdateSamples(mem ? mem->samples : std::vector<CounterSample>{},
                            *g.ecc_corrected_volatile, ctx.now, *r.window);
  if (c.samples.empty()) return;
  if (c.samples.size() > 1) c.expires = c.samples[1].at + *r.window;  // the baseline moves on
  const uint64_t increase = *g.ecc_corrected_volatile - c.samples.front().value;
  const uint64_t limit = *r.ecc->correctable_volatile_increase_above;
  if (increase <= limit) return;
  c.holds = true;
  c.detail += std::string(c.detail.empty() ? "" : ", ") + "correctable ECC errors +" +
              Num(increase) + " in " + FormatDuration(*r.window) + " > " + Num(limit);
}

// A nodeCondition rule: the Node has the condition type with the wanted status. Node-wide
// (another detector's verdict on the whole node); `for` counts from lastTransitionTime.
std::optional<Condition> NodeConditionHolds(EvalContext& ctx, const api::NodeConditionMatcher& m) {
  for (const NodeConditionFact& f : ctx.node_conditions) {
    if (f.type != m.type || f.status != m.status) continue;
    Condition c;
    c.holds = true;
    c.node_wide = true;
    c.detail =
        "condition " + f.type + "=" + f.status + (f.reason.empty() ? "" : " (" + f.reason + ")");
    if (f.last_transition_time) c.since = Clamp(ctx, *f.last_transition_time);
    return c;
  }
  return std::nullopt;
}

// Rule `r`'s conditions per target (GPU, unmapped PCI device or the node).
std::vector<std::pair<Target, Condition>> RuleConditions(EvalContext& ctx, const Rule& r,
                                                         bool any_unavailable) {
  const api::GpuNodeHealthStatus& report = ctx.report;
  std::vector<std::pair<Target, Condition>> conds;
  if (r.xid) {
    for (auto& [key, slot] : XidConditions(ctx, r)) conds.push_back(slot);
  } else if (r.node_condition) {
    if (auto c = NodeConditionHolds(ctx, *r.node_condition)) {
      conds.push_back({Target{"node", -1, "", "node"}, *c});
    }
  } else if (r.gpu_missing) {
    int seen = int(report.gpus.size());
    if (report.expected_gpus > 0 && seen < report.expected_gpus && !any_unavailable) {
      Condition c;
      c.holds = true;
      c.node_wide = true;
      c.detail = Num(seen) + " of " + Num(report.expected_gpus) + " expected GPUs visible";
      conds.push_back({Target{"node", -1, "", "node"}, c});
    }
  } else {
    for (const auto& g : report.gpus) {
      Condition c = LevelCondition(r, g);
      Target t{g.uuid.empty() ? "index:" + Num(g.index) : g.uuid, g.index, g.uuid, GpuLabel(g)};
      if (r.ecc && r.ecc->correctable_volatile_increase_above) EccRate(ctx, r, g, t.key, c);
      if (!c.holds && c.samples.empty()) continue;
      conds.push_back({std::move(t), std::move(c)});
    }
  }
  return conds;
}

// Every rule's matches: fired ones become evidence, those still inside their `for` pending;
// the memory of matches (since when, latched) is rebuilt.
void MatchRules(EvalContext& ctx, bool any_unavailable, Verdict& v) {
  const WallTime now = ctx.now;
  std::vector<MatchMemory> matches;
  for (const Rule& r : ctx.spec.rules) {
    for (auto& [t, c] : RuleConditions(ctx, r, any_unavailable)) {
      const MatchMemory* mem = FindMatch(ctx.prior, r.name, t.key);
      const bool held = mem && mem->Holding();
      bool latched = held && mem->latched;
      // A fired Xid count rule stays fired while the Xid keeps recurring in the window.
      bool holds = c.holds || (latched && c.recent_in_window);
      if (!holds) {
        if (!c.samples.empty()) matches.push_back({r.name, t.key, WallTime{}, false, c.samples});
        continue;
      }
      WallTime since = c.since ? *c.since : held ? mem->since : now;
      std::string message = t.label + ": " + c.detail;
      if (r.for_ && now - since < *r.for_) {
        matches.push_back({r.name, t.key, since, false, c.samples});
        v.pending.push_back({r.name, r.action, t.index, t.uuid, message, since, since + *r.for_});
        Consider(v.next_evaluation, since + *r.for_, now);
        continue;
      }
      bool latch = r.xid && r.count > 1;
      if (r.for_ || latch || !c.samples.empty()) {
        matches.push_back({r.name, t.key, since, latch, c.samples});
      }
      if (c.expires) Consider(v.next_evaluation, *c.expires + std::chrono::seconds(1), now);
      std::vector<MigInstance> mig;
      if (!c.whole_gpu) mig.assign(c.mig.begin(), c.mig.end());
      v.evidence.push_back(
          {r.name, r.action, t.index, t.uuid, message, c.node_wide, std::move(mig)});
    }
  }
  std::sort(matches.begin(), matches.end(), [](const MatchMemory& a, const MatchMemory& b) {
    return std::tie(a.rule, a.key) < std::tie(b.rule, b.key);
  });
  v.memory.matches = std::move(matches);
}

// The state from the evidence: Unhealthy (most severe action), Unknown (no telemetry) or
// Healthy.
void Classify(const api::GpuHealthPolicySpec& spec, const api::GpuNodeHealthStatus& report,
              const SourceHealth& sources, Verdict& v) {
  std::set<std::string> bad;
  bool node_wide = false;
  Action worst = Action::kNone;
  std::string summary;
  for (const auto& e : v.evidence) {
    if (e.action == Action::kNone) continue;
    worst = std::max(worst, e.action);
    if (!e.gpu_uuid.empty()) bad.insert(e.gpu_uuid);
    if (e.node_wide || e.gpu_uuid.empty()) node_wide = true;
    summary += (summary.empty() ? "" : "; ") + e.rule + ": " + e.message;
  }
  v.bad_gpus.assign(bad.begin(), bad.end());
  if (int(v.bad_gpus.size()) > spec.remediation.max_bad_gpus_for_device_level) node_wide = true;

  if (worst != Action::kNone) {
    v.state = HealthState::kUnhealthy;
    v.action = worst;
    v.node_wide = node_wide;
    v.reason = "RulesMatched";
    v.message = summary;
  } else if (sources.all_unavailable) {
    std::string why;
    for (const auto& s : report.sources) {
      why += (why.empty() ? "" : "; ") + s.name + (s.message.empty() ? "" : ": " + s.message);
    }
    FinishUnknown(v, spec, UnknownCause::kTelemetryUnavailable,
                  "All telemetry sources unavailable (" + why + ")");
  } else if (report.gpus.empty() && report.expected_gpus > 0 && sources.any_unavailable) {
    FinishUnknown(v, spec, UnknownCause::kTelemetryUnavailable,
                  "No GPU facts: a telemetry source is unavailable");
  } else {
    v.state = HealthState::kHealthy;
    v.reason = "GPUsHealthy";
    v.message = Num(report.gpus.size()) + " GPU(s) healthy";
    if (!v.pending.empty()) v.message += ", " + Num(v.pending.size()) + " rule match(es) pending";
  }
}

// A readable report: Unknown when its heartbeat is missing or stale, else the rules decide.
void EvaluateReportFacts(const api::GpuHealthPolicySpec& spec,
                         const api::GpuNodeHealthStatus& report, const EvalMemory& prior,
                         WallTime now, const std::vector<NodeConditionFact>& node_conditions,
                         Verdict& v) {
  EvalContext ctx{spec, report, prior, now, node_conditions};
  WallTime hb = report.heartbeat_time != WallTime{} ? report.heartbeat_time : report.observed_at;
  if (hb == WallTime{}) {
    FinishUnknown(v, spec, UnknownCause::kInvalidReport, "GPU health report has no heartbeatTime");
  } else if (hb = Clamp(ctx, hb); now - hb > spec.unknown.after) {
    FinishUnknown(v, spec, UnknownCause::kStaleReport,
                  "Last agent heartbeat " + FormatRfc3339(hb) + " is older than " +
                      FormatDuration(spec.unknown.after));
  } else {
    Consider(v.next_evaluation, hb + spec.unknown.after + std::chrono::seconds(1), now);
    const SourceHealth sources = SourcesOf(report);
    MatchRules(ctx, sources.any_unavailable, v);
    Classify(spec, report, sources, v);
  }
  v.clock_skew = ctx.clock_skew;
}

// State memory and recovery hysteresis. Absent memory state means healthy as far as we know,
// so a node that was always healthy never needs a write.
void UpdateMemory(const api::GpuHealthPolicySpec& spec, const EvalMemory& prior, WallTime now,
                  Verdict& v) {
  if (v.state == HealthState::kHealthy && !prior.state) {
    v.memory.state.reset();
    v.memory.since.reset();
  } else if (prior.state != v.state) {
    v.memory.state = v.state;
    v.memory.since = now;
  }
  if (v.state == HealthState::kHealthy) {
    bool always = !v.memory.state;
    if (!always) v.healthy_since = v.memory.since;
    WallTime recovered_at = always ? now : *v.memory.since + spec.recovery.healthy_for;
    v.recovered = spec.recovery.automatic && recovered_at <= now;
    if (spec.recovery.automatic && !v.recovered) Consider(v.next_evaluation, recovered_at, now);
  }
}

Verdict EvaluateImpl(const api::GpuHealthPolicy& policy, const api::GpuNodeHealthStatus* report,
                     const std::string& report_error, const EvalMemory& prior, WallTime now,
                     const std::vector<NodeConditionFact>& node_conditions) {
  const auto& spec = policy.spec;
  Verdict v;
  v.policy = policy.name;
  v.memory = prior;
  if (!report) {
    if (report_error.empty()) {
      FinishUnknown(v, spec, UnknownCause::kNoReport, "No GPU health report for this node");
    } else {
      FinishUnknown(v, spec, UnknownCause::kInvalidReport,
                    "GPU health report could not be read: " + report_error);
    }
  } else {
    EvaluateReportFacts(spec, *report, prior, now, node_conditions, v);
  }
  UpdateMemory(spec, prior, now, v);
  if (v.clock_skew) v.message += " (clock skew: a report time was in the future; used now)";
  Truncate(v.message);
  v.memory_changed = !(v.memory == prior);
  return v;
}

int StateRank(HealthState s) {
  switch (s) {
    case HealthState::kUnhealthy:
      return 2;
    case HealthState::kUnknown:
      return 1;
    case HealthState::kHealthy:
      return 0;
  }
  return 0;
}

}  // namespace

std::string_view UnknownCauseName(UnknownCause c) {
  switch (c) {
    case UnknownCause::kNone:
      return "";
    case UnknownCause::kNoReport:
      return "NoReport";
    case UnknownCause::kInvalidReport:
      return "InvalidReport";
    case UnknownCause::kStaleReport:
      return "StaleReport";
    case UnknownCause::kTelemetryUnavailable:
      return "TelemetryUnavailable";
  }
  return "";
}

std::vector<std::string> Verdict::MatchedRules() const {
  std::vector<std::string> out;
  for (const auto& e : evidence) {
    if (e.action != api::Action::kNone && !Contains(out, e.rule)) out.push_back(e.rule);
  }
  return out;
}

Verdict Evaluate(const api::GpuHealthPolicy& policy,
                 const std::optional<api::GpuNodeHealthStatus>& report, const EvalMemory& prior,
                 WallTime now, const std::vector<NodeConditionFact>& node_conditions) {
  return EvaluateImpl(policy, report ? &*report : nullptr, "", prior, now, node_conditions);
}

Verdict EvaluateReport(const api::GpuHealthPolicy& policy,
                       const StatusOr<api::GpuNodeHealthStatus>& report, const EvalMemory& prior,
                       WallTime now, const std::vector<NodeConditionFact>& node_conditions) {
  if (report.ok()) return EvaluateImpl(policy, &*report, "", prior, now, node_conditions);
  if (IsNotFound(report.status())) {
    return EvaluateImpl(policy, nullptr, "", prior, now, node_conditions);
  }
  std::string err = report.status().message().empty() ? "decode error" : report.status().message();
  return EvaluateImpl(policy, nullptr, err, prior, now, node_conditions);
}

bool Precedes(const Verdict& a, const Verdict& b) {
  if (a.action != b.action) return a.action > b.action;
  if (a.state != b.state) return StateRank(a.state) > StateRank(b.state);
  return a.policy < b.policy;
}

std::optional<Verdict> Resolve(const std::vector<Verdict>& verdicts) {
  if (verdicts.empty()) return std::nullopt;
  const Verdict* best = &verdicts[0];
  for (const auto& v : verdicts) {
    if (Precedes(v, *best)) best = &v;
  }
  Verdict out = *best;
  for (const auto& v : verdicts) {
    if (v.next_evaluation && (!out.next_evaluation || *v.next_evaluation < *out.next_evaluation)) {
      out.next_evaluation = v.next_evaluation;
    }
    if (!v.recovered) out.recovered = false;
  }
  return out;
}

}  // namespace gg::policy
