// PDB status arithmetic (disruption controller) and eviction decisions (eviction REST).
#include "sim/pdb.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "common/time_util.h"
#include "sim/api_error.h"
#include "sim/json_path.h"

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr auto kDeletionTimeout = std::chrono::minutes(2);
constexpr size_t kMaxDisruptedPodSize = 2000;

std::string Str(const json& obj, std::initializer_list<const char*> keys) {
  const json& v = JsonAt(obj, keys);
  return v.is_string() ? v.get<std::string>() : "";
}

int64_t Int(const json& obj, std::initializer_list<const char*> keys) {
  const json& v = JsonAt(obj, keys);
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

// intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true).
StatusOr<int> Scaled(const json& v, int total) {
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0 || i > 1'000'000'000)
      return InvalidArgumentError("invalid value for IntOrString: " + v.dump());
    return static_cast<int>(i);
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() < 2 || s.back() != '%')
      return InvalidArgumentError(
          "invalid value for IntOrString: invalid type: string is not a percentage");
    int64_t pct = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9' || i > 9)
        return InvalidArgumentError("invalid value \"" + s + "\": invalid percentage");
      pct = pct * 10 + (s[i] - '0');
    }
    int64_t num = pct * total;
    return static_cast<int>((num + 99) / 100);
  }
  return InvalidArgumentError("invalid value for IntOrString: " + v.dump());
}

const json* ControllerRef(const json& pod) {
  const json& refs = JsonAt(pod, {"metadata", "ownerReferences"});
  if (!refs.is_array()) return nullptr;
  for (const auto& r : refs)
    if (r.is_object() && r.value("controller", false) == true) return &r;
  return nullptr;
}

bool Deleting(const json& pod) {
  const json& d = JsonAt(pod, {"metadata", "deletionTimestamp"});
  return !d.is_null();
}

// status.disruptedPods, keeping the entries whose pod is selected, is not being deleted and
// was disrupted less than 2 minutes before `now` (when known).
std::map<std::string, std::string> KeptDisruptedPods(const json& pdb,
                                                     const std::vector<const json*>& selected,
                                                     std::optional<WallTime> now) {
  std::map<std::string, const json*> by_name;
  for (const json* p : selected) by_name[Str(*p, {"metadata", "name"})] = p;
  std::map<std::string, std::string> kept;
  const json& dp = JsonAt(pdb, {"status", "disruptedPods"});
  if (!dp.is_object()) return kept;
  for (auto it = dp.begin(); it != dp.end(); ++it) {
    auto pod = by_name.find(it.key());
    if (pod == by_name.end() || Deleting(*pod->second) || !it->is_string()) continue;
    auto t = ParseRfc3339(it->get<std::string>());
    if (!t.ok() || (now && *t + kDeletionTimeout < *now)) continue;
    kept[it.key()] = it->get<std::string>();
  }
  return kept;
}

// The pods the budget expects: the sum of the scale of the selected pods' controllers (or,
// without a scale lookup, their pod counts). Pods without a controller go to
// st.unmanaged_pods; a controller the lookup cannot find sets st.sync_failure.
StatusOr<int> ExpectedScale(const std::vector<const json*>& selected, const ScaleLookup& scale,
                            PdbStatus& st) {
  std::map<std::string, int> per_controller;  // uid -> scale
  std::map<std::string, int> pod_counts;
  for (const json* p : selected) {
    const json* ref = ControllerRef(*p);
    if (!ref) {
      st.unmanaged_pods.push_back(Str(*p, {"metadata", "name"}));
      continue;
    }
    std::string uid = ref->value("uid", "");
    pod_counts[uid]++;
    if (per_controller.count(uid)) continue;
    if (scale) {
      auto s = scale(*ref, Str(*p, {"metadata", "namespace"}));
      if (!s) {
        st.sync_failure = "found no controllers for pod \"" + Str(*p, {"metadata", "name"}) + "\"";
        return 0;
      }
      per_controller[uid] = *s;
    } else {
      per_controller[uid] = -1;  // filled from pod counts below
    }
  }
  int total = 0;
  for (auto& [uid, n] : per_controller) total += n < 0 ? pod_counts[uid] : n;
  return total;
}

}  // namespace

bool PodIsReady(const json& pod) {
  const json& conds = JsonAt(pod, {"status", "conditions"});
  if (!conds.is_array()) return false;
  for (const auto& c : conds)
    if (c.is_object() && c.value("type", json()) == "Ready")
      return c.value("status", json()) == "True";
  return false;
}

bool PdbSelectsPod(const json& pdb, const json& pod) {
  if (Str(pdb, {"metadata", "namespace"}) != Str(pod, {"metadata", "namespace"})) return false;
  auto sel = LabelSelector::FromJson(JsonAt(pdb, {"spec", "selector"}));
  if (!sel.ok()) return false;
  return sel->MatchesJson(JsonAt(pod, {"metadata", "labels"}));
}

StatusOr<PdbStatus> ComputePdbStatus(const json& pdb, const std::vector<json>& pods,
                                     const ScaleLookup& scale) {
  return ComputePdbStatus(pdb, pods, "", scale);
}

StatusOr<PdbStatus> ComputePdbStatus(const json& pdb, const std::vector<json>& pods,
                                     std::string_view now_rfc3339, const ScaleLookup& scale) {
  if (!pdb.is_object()) return InvalidArgumentError("PodDisruptionBudget must be an object");
  std::optional<WallTime> now;
  if (!now_rfc3339.empty()) {
    GG_ASSIGN_OR_RETURN(now, ParseRfc3339(now_rfc3339));
  }
  std::vector<const json*> selected;
  for (const auto& p : pods)
    if (p.is_object() && PdbSelectsPod(pdb, p)) selected.push_back(&p);
  PdbStatus st;
  st.disrupted_pods = KeptDisruptedPods(pdb, selected, now);

  const json& min_av = JsonAt(pdb, {"spec", "minAvailable"});
  const json& max_un = JsonAt(pdb, {"spec", "maxUnavailable"});
  if (!max_un.is_null()) {
    GG_ASSIGN_OR_RETURN(st.expected_pods, ExpectedScale(selected, scale, st));
    GG_ASSIGN_OR_RETURN(int mu, Scaled(max_un, st.expected_pods));
    st.desired_healthy = std::max(0, st.expected_pods - mu);
  } else if (!min_av.is_null()) {
    if (min_av.is_number_integer()) {
      GG_ASSIGN_OR_RETURN(st.desired_healthy, Scaled(min_av, 0));
      st.expected_pods = static_cast<int>(selected.size());
    } else {
      GG_ASSIGN_OR_RETURN(st.expected_pods, ExpectedScale(selected, scale, st));
      GG_ASSIGN_OR_RETURN(st.desired_healthy, Scaled(min_av, st.expected_pods));
    }
  }
  for (const json* p : selected) {
    if (Deleting(*p)) continue;
    if (st.disrupted_pods.count(Str(*p, {"metadata", "name"}))) continue;
    if (PodIsReady(*p)) st.current_healthy++;
  }
  if (!st.sync_failure.empty()) {
    st.disruptions_allowed = 0;
    return st;
  }
  st.disruptions_allowed = st.current_healthy - st.desired_healthy;
  if (st.expected_pods <= 0 || st.disruptions_allowed <= 0) st.disruptions_allowed = 0;
  return st;
}

json ApplyPdbStatus(const json& pdb, const PdbStatus& st, std::string_view now_rfc3339) {
  json out = pdb.is_object() ? pdb : json::object();
  json old_status = out.value("status", json::object());
  if (!old_status.is_object()) old_status = json::object();
  json s = old_status;
  s["expectedPods"] = st.expected_pods;
  s["currentHealthy"] = st.current_healthy;
  s["desiredHealthy"] = st.desired_healthy;
  s["disruptionsAllowed"] = st.disruptions_allowed;
  s["observedGeneration"] = Int(pdb, {"metadata", "generation"});
  if (st.disrupted_pods.empty()) {
    s.erase("disruptedPods");
  } else {
    s["disruptedPods"] = json::object();
    for (auto& [k, v] : st.disrupted_pods) s["disruptedPods"][k] = v;
  }
  std::string status = st.sync_failure.empty() && st.disruptions_allowed > 0 ? "True" : "False";
  std::string reason = !st.sync_failure.empty() ? "SyncFailed"
                       : status == "True"       ? "SufficientPods"
                                                : "InsufficientPods";
  json cond = {{"type", "DisruptionAllowed"},
               {"status", status},
               {"reason", reason},
               {"message", st.sync_failure},
               {"observedGeneration", s["observedGeneration"]},
               {"lastTransitionTime", std::string(now_rfc3339)}};
  json conds = json::array();
  if (s.contains("conditions") && s["conditions"].is_array()) conds = s["conditions"];
  bool found = false;
  for (auto& c : conds) {
    if (!c.is_object() || c.value("type", json()) != "DisruptionAllowed") continue;
    found = true;
    if (c.value("status", json()) == status && c.contains("lastTransitionTime"))
      cond["lastTransitionTime"] = c["lastTransitionTime"];
    c = cond;
  }
  if (!found) conds.push_back(cond);
  s["conditions"] = conds;
  out["status"] = std::move(s);
  return out;
}

json PdbTooManyRequestsStatus(std::string_view cause_message, int retry_after_seconds) {
  ApiError e;
  e.code = 429;
  e.reason = "TooManyRequests";
  e.message = "Cannot evict pod as it would violate the pod's disruption budget.";
  e.causes.push_back({"DisruptionBudget", std::string(cause_message), ""});
  e.retry_after_seconds = retry_after_seconds;
  return e.ToJson();
}

json EvictionSuccessStatus() {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"code", 201}};
}

EvictionDecision DecideEviction(const json& pod, const std::vector<json>& namespace_pdbs,
                                std::string_view now_rfc3339) {
  EvictionDecision d;
  d.status = EvictionSuccessStatus();
  std::string phase = Str(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed" || phase == "Pending" || Deleting(pod)) return d;
  std::vector<const json*> pdbs;
  for (const auto& p : namespace_pdbs)
    if (PdbSelectsPod(p, pod)) pdbs.push_back(&p);
  if (pdbs.empty()) return d;
  if (pdbs.size() > 1) {
    d.outcome = EvictionDecision::Outcome::kInternalError;
    d.code = 500;
    d.status = InternalErr(
                   "This pod has more than one PodDisruptionBudget, which the eviction "
                   "subresource does not support.")
                   .ToJson();
    return d;
  }
  const json& pdb = *pdbs[0];
  std::string name = Str(pdb, {"metadata", "name"});
  int64_t current = Int(pdb, {"status", "currentHealthy"});
  int64_t desired = Int(pdb, {"status", "desiredHealthy"});
  if (!PodIsReady(pod)) {
    if (Str(pdb, {"spec", "unhealthyPodEvictionPolicy"}) == "AlwaysAllow") return d;
    if (current >= desired && desired > 0) return d;
  }
  auto too_many = [&](std::string msg, int retry) {
    d.outcome = EvictionDecision::Outcome::kTooManyRequests;
    d.code = 429;
    d.status = PdbTooManyRequestsStatus(msg, retry);
    return d;
  };
  if (Int(pdb, {"status", "observedGeneration"}) < Int(pdb, {"metadata", "generation"}))
    return too_many("The disruption budget " + name + " is still being processed by the server.",
                    10);
  int64_t allowed = Int(pdb, {"status", "disruptionsAllowed"});
  const json& dp = JsonAt(pdb, {"status", "disruptedPods"});
  auto forbidden = [&](const std::string& why) {
    d.outcome = EvictionDecision::Outcome::kForbidden;
    d.code = 403;
    d.status =
        ForbiddenErr("poddisruptionbudgets.policy \"" + name + "\" is forbidden: " + why).ToJson();
    return d;
  };
  if (allowed < 0) return forbidden("pdb disruptions allowed is negative");
  if (dp.is_object() && dp.size() > kMaxDisruptedPodSize)
    return forbidden(
        "DisruptedPods map too big - too many evictions not confirmed by PDB controller");
  if (allowed == 0)
    return too_many("The disruption budget " + name + " needs " + std::to_string(desired) +
                        " healthy pods and has " + std::to_string(current) + " currently",
                    0);
  json updated = pdb;
  updated["status"]["disruptionsAllowed"] = allowed - 1;
  if (!updated["status"].contains("disruptedPods") ||
      !updated["status"]["disruptedPods"].is_object())
    updated["status"]["disruptedPods"] = json::object();
  updated["status"]["disruptedPods"][Str(pod, {"metadata", "name"})] = std::string(now_rfc3339);
  if (allowed - 1 == 0 && updated["status"].contains("conditions") &&
      updated["status"]["conditions"].is_array()) {
    for (auto& c : updated["status"]["conditions"])
      if (c.is_object() && c.value("type", json()) == "DisruptionAllowed" &&
          c.value("status", json()) != "False") {
        c["status"] = "False";
        c["reason"] = "InsufficientPods";
        c["lastTransitionTime"] = std::string(now_rfc3339);
      }
  }
  d.updated_pdb = std::move(updated);
  return d;
}

}  // namespace gg::sim
