// GPUHealthPolicy helpers: enum names, IntOrPercent, label selectors, the conservative
// defaults and semantic validation (what the CRD schema and CEL rules cannot say).
#include "api/gpu_health_policy.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <set>

#include "api/gpu_node_health.h"
#include "common/time_util.h"

namespace gg::api {

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kNone:
      return "None";
    case Action::kEvent:
      return "Event";
    case Action::kTaint:
      return "Taint";
    case Action::kCordon:
      return "Cordon";
    case Action::kDrain:
      return "Drain";
  }
  return "None";
}
std::optional<Action> ParseAction(std::string_view s) {
  for (Action a :
       {Action::kNone, Action::kEvent, Action::kTaint, Action::kCordon, Action::kDrain}) {
    if (ActionName(a) == s) return a;
  }
  return std::nullopt;
}

std::string_view TaintEffectName(TaintEffect e) {
  switch (e) {
    case TaintEffect::kNoSchedule:
      return "NoSchedule";
    case TaintEffect::kPreferNoSchedule:
      return "PreferNoSchedule";
    case TaintEffect::kNoExecute:
      return "NoExecute";
  }
  return "NoSchedule";
}
std::optional<TaintEffect> ParseTaintEffect(std::string_view s) {
  for (TaintEffect e :
       {TaintEffect::kNoSchedule, TaintEffect::kPreferNoSchedule, TaintEffect::kNoExecute}) {
    if (TaintEffectName(e) == s) return e;
  }
  return std::nullopt;
}

std::string_view DrainScopeName(DrainScope s) {
  return s == DrainScope::kAllPods ? "AllPods" : "GPUPods";
}
std::optional<DrainScope> ParseDrainScope(std::string_view s) {
  if (s == "GPUPods") return DrainScope::kGpuPods;
  if (s == "AllPods") return DrainScope::kAllPods;
  return std::nullopt;
}

std::string_view DeviceLevelModeName(DeviceLevelMode m) {
  return m == DeviceLevelMode::kAuto ? "Auto" : "Off";
}
std::string_view DeviceTaintEffectName(DeviceTaintEffect e) {
  switch (e) {
    case DeviceTaintEffect::kNone:
      return "None";
    case DeviceTaintEffect::kNoSchedule:
      return "NoSchedule";
    case DeviceTaintEffect::kNoExecute:
      return "NoExecute";
  }
  return "NoSchedule";
}
std::optional<DeviceTaintEffect> ParseDeviceTaintEffect(std::string_view s) {
  if (s == "None") return DeviceTaintEffect::kNone;
  if (s == "NoSchedule") return DeviceTaintEffect::kNoSchedule;
  if (s == "NoExecute") return DeviceTaintEffect::kNoExecute;
  return std::nullopt;
}
std::optional<DeviceLevelMode> ParseDeviceLevelMode(std::string_view s) {
  if (s == "Auto") return DeviceLevelMode::kAuto;
  if (s == "Off") return DeviceLevelMode::kOff;
  return std::nullopt;
}

int64_t IntOrPercent::Resolve(int64_t total) const {
  if (!percent) return value;
  if (value <= 0 || total <= 0) return 0;
  // ceil(total * value / 100) in integers: exact, no floating point.
  return (total * value + 99) / 100;
}

std::string IntOrPercent::ToString() const { return std::to_string(value) + (percent ? "%" : ""); }

StatusOr<IntOrPercent> ParseIntOrPercent(std::string_view s) {
  IntOrPercent out;
  std::string_view digits = s;
  if (!digits.empty() && digits.back() == '%') {
    out.percent = true;
    digits.remove_suffix(1);
  }
  if (digits.empty() || digits.size() > 12) {
    return InvalidArgumentError("expected an integer or a percentage like \"10%\", got \"" +
                                std::string(s) + "\"");
  }
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out.value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || out.value < 0) {
    return InvalidArgumentError("expected an integer or a percentage like \"10%\", got \"" +
                                std::string(s) + "\"");
  }
  return out;
}

int Rule::MatcherCount() const {
  return int(xid.has_value()) + int(ecc.has_value()) + int(remapped_rows.has_value()) +
         int(retired_pages.has_value()) + int(thermal.has_value()) + int(gpu_lost) +
         int(gpu_missing) + int(nvlink.has_value()) + int(pcie_replay_above.has_value()) +
         int(!recovery_actions.empty()) + int(node_condition.has_value()) + int(power.has_value());
}

std::vector<Rule> DefaultRules() {
  using std::chrono::hours;
  using std::chrono::minutes;
  std::vector<Rule> rules;
  {
    Rule r;
    r.name = "fatal-xid";
    r.xid = XidMatcher{{"RESET_GPU", "RESTART_BM"},
                       {48, 64, 74, 79, 95, 119, 120},
                       {std::begin(kApplicationXids), std::end(kApplicationXids)},
                       false};
    r.count = 1;
    r.window = hours(24);
    r.action = Action::kCordon;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "gpu-lost";
    r.gpu_lost = true;
    r.action = Action::kCordon;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "gpu-missing";
    r.gpu_missing = true;
    r.for_ = minutes(5);
    r.action = Action::kCordon;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "uncorrectable-ecc";
    r.ecc = EccMatcher{0, std::nullopt, std::nullopt};
    r.action = Action::kCordon;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "row-remap-failure";
    r.remapped_rows = RemappedRowsMatcher{true, false, std::nullopt};
    r.action = Action::kCordon;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "row-remap-pending";
    r.remapped_rows = RemappedRowsMatcher{false, true, std::nullopt};
    r.action = Action::kTaint;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "driver-recovery-action";
    r.recovery_actions = {"NodeReboot", "DrainAndReset"};
    r.action = Action::kCordon;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "nvlink-down";
    r.nvlink = NvlinkMatcher{0, std::nullopt};
    r.for_ = minutes(5);
    r.action = Action::kTaint;
    rules.push_back(r);
  }
  {
    Rule r;
    r.name = "thermal-slowdown";
    r.thermal = ThermalMatcher{std::nullopt, {"HwThermalSlowdown", "SwThermalSlowdown"}};
    r.for_ = minutes(5);
    r.action = Action::kEvent;
    rules.push_back(r);
  }
  return rules;
}

GpuHealthPolicySpec DefaultPolicySpec() {
  GpuHealthPolicySpec spec;
  spec.node_selector.match_labels["nvidia.com/gpu.present"] = "true";
  spec.rules = DefaultRules();
  return spec;
}

std::string EscalationTemplate::RemediationKind() const {
  constexpr std::string_view kSuffix = "Template";
  if (!kind.ends_with(kSuffix)) return kind;
  return kind.substr(0, kind.size() - kSuffix.size());
}

namespace {

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

bool KnownRecoveryAction(const std::string& s) {
  return s == "GpuReset" || s == "NodeReboot" || s == "DrainP2P" || s == "DrainAndReset";
}

}  // namespace

namespace {
// A DRA driver name (ResourceSlice spec.driver): a DNS subdomain, at most 63 characters, as
// the resource.k8s.io validation requires.
bool ValidDeviceDriverName(std::string_view d) {
  if (d.empty() || d.size() > 63) return false;
  size_t start = 0;
  while (start <= d.size()) {
    size_t dot = d.find('.', start);
    std::string_view label = d.substr(start, dot == std::string_view::npos ? d.npos : dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}
}  // namespace

namespace {

using AddError = std::function<void(std::string path, std::string msg)>;

void ValidateSelector(const LabelSelector& selector, const std::string& path, const AddError& add) {
  for (size_t i = 0; i < selector.match_expressions.size(); ++i) {
    const auto& req = selector.match_expressions[i];
    std::string p = path + ".matchExpressions[" + std::to_string(i) + "]";
    if (req.key.empty()) add(p + ".key", "must not be empty");
    if (req.op == "In" || req.op == "NotIn") {
      if (req.values.empty()) add(p + ".values", "must not be empty for operator " + req.op);
    } else if (req.op == "Exists" || req.op == "DoesNotExist") {
      if (!req.values.empty()) add(p + ".values", "must be empty for operator " + req.op);
    } else {
      add(p + ".operator", "must be In, NotIn, Exists or DoesNotExist, got \"" + req.op + "\"");
    }
  }
}

// One rule's matcher, counting window and `for`.
void ValidateRuleShape(const Rule& r, const std::string& p, const AddError& add) {
  int matchers = r.MatcherCount();
  if (matchers == 0) {
    add(p,
        "exactly one matcher is required (xid, ecc, remappedRows, retiredPages, thermal, "
        "gpuLost, gpuMissing, nvlink, pcieReplayAbove, recoveryActions, nodeCondition, power); "
        "none is set");
  } else if (matchers > 1) {
    add(p, "exactly one matcher is allowed; " + std::to_string(matchers) + " are set");
  }
  if (r.xid) {
    if (r.xid->codes.empty() && r.xid->catalog_actions.empty()) {
      add(p + ".xid", "codes or catalogActions must name at least one Xid");
    }
    for (size_t j = 0; j < r.xid->codes.size(); ++j) {
      int c = r.xid->codes[j];
      std::string cp = p + ".xid.codes[" + std::to_string(j) + "]";
      if (c <= 0 || c > 1000) add(cp, "must be between 1 and 1000");
      if (std::find(r.xid->ignore.begin(), r.xid->ignore.end(), c) != r.xid->ignore.end()) {
        add(cp, "Xid " + std::to_string(c) + " is both matched and ignored");
      }
    }
    for (size_t j = 0; j < r.xid->ignore.size(); ++j) {
      int c = r.xid->ignore[j];
      if (c <= 0 || c > 1000) {
        add(p + ".xid.ignore[" + std::to_string(j) + "]", "must be between 1 and 1000");
      }
    }
  } else {
    if (r.count != 1) add(p + ".count", "only Xid rules count occurrences");
    if (r.window && !r.HasWindow()) {
      add(p + ".window",
          "only Xid rules and ecc.correctableVolatileIncreaseAbove have a window; use `for` for "
          "levels");
    }
  }
  if (r.ecc && r.ecc->correctable_volatile_increase_above && !r.window) {
    add(p + ".window", "ecc.correctableVolatileIncreaseAbove counts within a window: set one");
  }
  if (r.count < 1) add(p + ".count", "must be at least 1");
  if (r.window && *r.window <= Duration::zero()) add(p + ".window", "must be positive");
  if (r.for_ && *r.for_ < Duration::zero()) add(p + ".for", "must not be negative");
  if (r.window && r.for_ && *r.window < *r.for_) {
    add(p + ".window", "window (" + FormatDuration(*r.window) + ") is shorter than for (" +
                           FormatDuration(*r.for_) + "): the rule could never fire");
  }
}

// The thresholds a matcher needs to match anything.
void ValidateRuleThresholds(const Rule& r, const std::string& p, const AddError& add) {
  if (r.ecc && !r.ecc->uncorrectable_volatile_above && !r.ecc->correctable_volatile_above &&
      !r.ecc->uncorrectable_aggregate_above && !r.ecc->correctable_volatile_increase_above) {
    add(p + ".ecc", "set at least one threshold");
  }
  if (r.remapped_rows && !r.remapped_rows->failure && !r.remapped_rows->pending &&
      !r.remapped_rows->uncorrectable_above) {
    add(p + ".remappedRows", "set failure, pending or uncorrectableAbove");
  }
  if (r.retired_pages && !r.retired_pages->pending && !r.retired_pages->dbe_above &&
      !r.retired_pages->sbe_above) {
    add(p + ".retiredPages", "set pending, dbeAbove or sbeAbove");
  }
  if (r.thermal && !r.thermal->temperature_above_celsius && r.thermal->throttle_reasons.empty()) {
    add(p + ".thermal", "set temperatureAboveCelsius or throttleReasons");
  }
  if (r.power && (r.power->over_limit_percent < 0 || r.power->over_limit_percent > 100)) {
    add(p + ".power.overLimitPercent", "must be between 0 and 100");
  }
  if (r.nvlink && !r.nvlink->links_down_above && !r.nvlink->errors_above) {
    add(p + ".nvlink", "set linksDownAbove or errorsAbove");
  }
  if (r.nvlink && r.nvlink->links_down_above && *r.nvlink->links_down_above < 0) {
    add(p + ".nvlink.linksDownAbove", "must not be negative");
  }
  for (size_t j = 0; j < r.recovery_actions.size(); ++j) {
    if (!KnownRecoveryAction(r.recovery_actions[j])) {
      add(p + ".recoveryActions[" + std::to_string(j) + "]",
          "must be GpuReset, NodeReboot, DrainP2P or DrainAndReset");
    }
  }
}

// A condition type as Kubernetes allows it (a qualified name, here at most 316 characters of
// [A-Za-z0-9._/-]); never our own GPUHealthy, which the operator derives from the rules.
void ValidateNodeCondition(const NodeConditionMatcher& m, const std::string& p,
                           const AddError& add) {
  const bool chars_ok = std::all_of(m.type.begin(), m.type.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '/';
  });
  if (m.type.empty() || m.type.size() > 316 || !chars_ok) {
    add(p + ".type", "must be a condition type of 1-316 characters of [A-Za-z0-9._/-]");
  } else if (m.type == kConditionType) {
    add(p + ".type", "GPUHealthy is the operator's own verdict and cannot be a rule's input");
  }
  if (m.status != "True" && m.status != "False" && m.status != "Unknown") {
    add(p + ".status", "must be True, False or Unknown");
  }
  for (const char* kubelet : kKubeletPressureConditions) {
    if (m.type == kubelet && m.status == "False") {
      add(p + ".status", m.type + " is False on every healthy node; match True or Unknown");
    }
  }
  if (m.type == "Ready" && m.status == "True") {
    add(p + ".status", "Ready is True on every healthy node; match False or Unknown");
  }
}

void ValidateRules(const std::vector<Rule>& rules, const AddError& add) {
  std::set<std::string> names;
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    std::string p = "spec.rules[" + std::to_string(i) + "]";
    if (!ValidName(r.name)) {
      add(p + ".name", "must be 1-63 characters of [a-z0-9-], not starting or ending with '-'");
    } else if (!names.insert(r.name).second) {
      add(p + ".name", "duplicate rule name \"" + r.name + "\"");
    }
    ValidateRuleShape(r, p, add);
    ValidateRuleThresholds(r, p, add);
    if (r.node_condition) ValidateNodeCondition(*r.node_condition, p + ".nodeCondition", add);
  }
}

// Stages: the catch-all ({}) last; priority-only stages in increasing priorityBelow (a later
// one below an earlier one could never hold a pod). Selector stages may come in any order.
void ValidateDrainOrder(const std::vector<DrainStep>& order, const AddError& add) {
  std::optional<int32_t> prev;
  for (size_t i = 0; i < order.size(); ++i) {
    const DrainStep& st = order[i];
    std::string p = "spec.remediation.drain.order[" + std::to_string(i) + "]";
    if (st.MatchesAll()) {
      if (i + 1 != order.size()) {
        add(p, "a step without priorityBelow or podSelector (the rest) must be last");
      }
      continue;
    }
    if (st.pod_selector) {
      ValidateSelector(*st.pod_selector, p + ".podSelector", add);
      continue;
    }
    if (prev && *st.priority_below <= *prev) {
      add(p + ".priorityBelow", "must increase from step to step");
    }
    prev = st.priority_below;
  }
}

void ValidateRemediationAndRecovery(const GpuHealthPolicySpec& spec, const AddError& add) {
  if (spec.unknown.after <= Duration::zero()) add("spec.unknown.after", "must be positive");

  const DrainSpec& d = spec.remediation.drain;
  ValidateDrainOrder(d.order, add);
  if (d.grace_period_seconds && *d.grace_period_seconds < 0) {
    add("spec.remediation.drain.gracePeriodSeconds", "must not be negative");
  }
  if (d.timeout <= Duration::zero()) add("spec.remediation.drain.timeout", "must be positive");
  if (spec.remediation.max_bad_gpus_for_device_level < 1) {
    add("spec.remediation.maxBadGPUsForDeviceLevel", "must be at least 1");
  }
  if (!ValidDeviceDriverName(spec.remediation.device_driver)) {
    add("spec.remediation.deviceDriver",
        "must be a lowercase DNS subdomain of at most 63 characters (a DRA driver name such as "
        "gpu.nvidia.com)");
  }

  if (spec.recovery.healthy_for < Duration::zero()) {
    add("spec.recovery.healthyFor", "must not be negative");
  }
  const QuarantineSpec& q = spec.recovery.quarantine;
  if (q.after < 0 || q.after > kQuarantineAfterMax) {
    add("spec.recovery.quarantine.after",
        "must be between 0 (never quarantine) and " + std::to_string(kQuarantineAfterMax));
  }
  if (q.after > 0 && q.within <= Duration::zero()) {
    add("spec.recovery.quarantine.within", "must be positive");
  }
}

// A DNS subdomain (RFC 1123): dot-separated labels, at most 253 characters.
bool ValidSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!ValidName(s.substr(start, dot == std::string::npos ? s.npos : dot - start))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// The template reference: a namespaced object of a CRD kind <X>Template.
void ValidateEscalate(const EscalationTemplate& t, const AddError& add) {
  const std::string p = "spec.remediation.escalate.template";
  const size_t slash = t.api_version.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == t.api_version.size() ||
      !ValidSubdomain(t.api_version.substr(0, slash)) ||
      !ValidName(t.api_version.substr(slash + 1))) {
    add(p + ".apiVersion",
        "must be group/version of the template's CRD (e.g. "
        "self-node-remediation.medik8s.io/v1alpha1)");
  }
  constexpr std::string_view kSuffix = "Template";
  if (t.kind.size() <= kSuffix.size() || !t.kind.ends_with(kSuffix) ||
      !(t.kind.front() >= 'A' && t.kind.front() <= 'Z') ||
      !std::all_of(t.kind.begin(), t.kind.end(),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
    add(p + ".kind",
        "must be a kind ending in Template (the remediation kind is the same "
        "without the suffix)");
  }
  if (!ValidName(t.namespace_)) add(p + ".namespace", "must be a namespace name");
  if (!ValidSubdomain(t.name)) add(p + ".name", "must be an object name (DNS subdomain)");
}

void ValidateSafety(const SafetySpec& s, const AddError& add) {
  if (s.max_unhealthy.value < 0) add("spec.safety.maxUnhealthy", "must not be negative");
  if (s.max_unhealthy.percent && s.max_unhealthy.value > 100) {
    add("spec.safety.maxUnhealthy", "percentage must be at most 100%");
  }
  if (s.max_nodes_per_hour && *s.max_nodes_per_hour < 0) {
    add("spec.safety.maxNodesPerHour", "must not be negative");
  }
  if (s.max_concurrent_drains && *s.max_concurrent_drains < 0) {
    add("spec.safety.maxConcurrentDrains", "must not be negative");
  }
  if (s.max_devices_per_hour && *s.max_devices_per_hour < 0) {
    add("spec.safety.maxDevicesPerHour", "must not be negative");
  }
}

}  // namespace

std::vector<FieldError> ValidatePolicySpec(const GpuHealthPolicySpec& spec) {
  std::vector<FieldError> errs;
  AddError add = [&errs](std::string path, std::string msg) {
    errs.push_back({std::move(path), std::move(msg)});
  };
  ValidateSelector(spec.node_selector, "spec.nodeSelector", add);
  ValidateRules(spec.rules, add);
  ValidateRemediationAndRecovery(spec, add);
  ValidateSafety(spec.safety, add);
  if (spec.remediation.escalate) ValidateEscalate(*spec.remediation.escalate, add);
  return errs;
}

Status ValidationStatus(const std::vector<FieldError>& errors) {
  if (errors.empty()) return OkStatus();
  std::string msg;
  for (const auto& e : errors) {
    if (!msg.empty()) msg += "; ";
    msg += e.path + ": " + e.message;
  }
  return InvalidArgumentError(msg);
}

}  // namespace gg::api
