// The device-taint eviction controller (kube-controller-manager's devicetainteviction), run by
// the simulated cluster on releases that serve device taints (resource.k8s.io DeviceTaintRule,
// 1.33+; the simulator serves the alpha/beta APIs as if their gates were on).
//
// What it does, as the real controller does:
// - A device is tainted NoExecute by a taint in its ResourceSlice entry (`devices[].taints`,
//   or `devices[].basic.taints` in v1beta1; only slices of the pool's newest generation count)
//   or by a DeviceTaintRule with effect NoExecute whose `deviceSelector` (driver, pool, device:
//   every field that is set must match) selects it.
// - An allocated ResourceClaim is affected when one of its allocation results names a tainted
//   device and the result's tolerations (copied from the request at allocation) do not
//   tolerate the taint. A toleration counts when its effect is NoExecute and it matches the
//   taint (operator Exists: key empty or equal; Equal: key and value equal). Without
//   tolerationSeconds it tolerates forever; with it, eviction is due at the taint's timeAdded +
//   the smallest tolerationSeconds (negative counts as 0). The claim's time is the earliest
//   over its taints.
// - A scheduled, active pod is evicted at the earliest time of the claims it uses
//   (spec.resourceClaims by resourceClaimName, or through status.resourceClaimStatuses for a
//   template) that are reserved for it (status.reservedFor, by UID). Eviction is a DELETE with a
//   UID precondition after a DisruptionTarget condition (DeletionByDeviceTaintManager): no
//   Eviction API, so PodDisruptionBudgets are not consulted. An Event
//   DeviceTaintManagerEviction is recorded on the pod.
// - Removing the taint, adding a toleration (a new claim) or the pod going away cancels a
//   pending eviction.
// Simplifications: a taint without timeAdded counts from when this controller first saw it;
// tolerationSeconds are divided by the cluster's time scale; DeviceTaintRule status
// (EvictionInProgress) is not written; the v1alpha3 deviceClassName / CEL `selectors` of
// 1.33-1.34 rules are not evaluated (such a rule selects nothing here).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/controller_util.h"
#include "sim/controllers.h"

namespace gg::sim {

using internal::kPoll;
using internal::PodActive;
using internal::StoreWatch;
using internal::Str;
using nlohmann::json;

namespace {

struct DeviceTaint {
  std::string key, value;
  std::optional<WallTime> time_added;
  std::string source;  // "rule <name>" or "slice <name>/<device>#<i>": first-seen bookkeeping
};

struct DeviceToleration {
  std::string key, op = "Equal", value, effect;
  std::optional<std::int64_t> seconds;
  bool Tolerates(const DeviceTaint& t) const {
    if (effect != "NoExecute") return false;
    if (op == "Exists") return key.empty() || key == t.key;
    return key == t.key && value == t.value;
  }
};

struct AllocatedDevice {
  std::string driver, pool, device;
  std::vector<DeviceToleration> tolerations;
};

struct ClaimRec {
  std::vector<AllocatedDevice> devices;
  std::set<std::string> reserved_uids;
};

struct PodRec {
  std::string uid;
  std::vector<std::string> claims;  // claim names in the pod's namespace
  json pod;                         // for the Event
};

struct SliceRec {
  std::string driver, pool;
  std::int64_t generation = 0;
  std::map<std::string, std::vector<DeviceTaint>> no_execute;  // device -> its NoExecute taints
};

struct RuleRec {
  std::optional<std::string> driver, pool, device;
  bool selects_nothing = false;  // no selector, or selector fields we do not evaluate
  DeviceTaint taint;
};

std::optional<WallTime> TimeOf(const json& t) {
  if (!t.contains("timeAdded") || !t["timeAdded"].is_string()) return std::nullopt;
  return internal::ParseTime(t["timeAdded"].get<std::string>());
}

std::optional<std::string> OptStr(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return std::nullopt;
  return obj[key].get<std::string>();
}

SliceRec ParseSlice(const json& s, const std::string& name) {
  SliceRec r;
  r.driver = Str(s, {"spec", "driver"});
  r.pool = Str(s, {"spec", "pool", "name"});
  if (s.contains("spec") && s["spec"].contains("pool") && s["spec"]["pool"].is_object() &&
      s["spec"]["pool"].contains("generation") &&
      s["spec"]["pool"]["generation"].is_number_integer())
    r.generation = s["spec"]["pool"]["generation"].get<std::int64_t>();
  if (!s.contains("spec") || !s["spec"].contains("devices") || !s["spec"]["devices"].is_array())
    return r;
  for (const auto& d : s["spec"]["devices"]) {
    if (!d.is_object()) continue;
    const std::string dev = d.value("name", "");
    // v1beta2/v1: devices[].taints; v1beta1: devices[].basic.taints.
    const json* taints = nullptr;
    if (d.contains("taints") && d["taints"].is_array()) taints = &d["taints"];
    if (!taints && d.contains("basic") && d["basic"].is_object() && d["basic"].contains("taints") &&
        d["basic"]["taints"].is_array())
      taints = &d["basic"]["taints"];
    if (!taints) continue;
    int i = 0;
    for (const auto& t : *taints) {
      if (t.is_object() && t.value("effect", "") == "NoExecute")
        r.no_execute[dev].push_back(
            DeviceTaint{t.value("key", ""), t.value("value", ""), TimeOf(t),
                        "slice " + name + "/" + dev + "#" + std::to_string(i)});
      ++i;
    }
  }
  return r;
}

std::optional<RuleRec> ParseRule(const json& r, const std::string& name) {
  if (!r.contains("spec") || !r["spec"].is_object()) return std::nullopt;
  const json& spec = r["spec"];
  if (!spec.contains("taint") || !spec["taint"].is_object()) return std::nullopt;
  const json& t = spec["taint"];
  if (t.value("effect", "") != "NoExecute") return std::nullopt;
  RuleRec rec;
  rec.taint = DeviceTaint{t.value("key", ""), t.value("value", ""), TimeOf(t), "rule " + name};
  if (!spec.contains("deviceSelector") || !spec["deviceSelector"].is_object()) {
    rec.selects_nothing = true;  // as the real controller: a rule without selector evicts nothing
    return rec;
  }
  const json& sel = spec["deviceSelector"];
  rec.driver = OptStr(sel, "driver");
  rec.pool = OptStr(sel, "pool");
  rec.device = OptStr(sel, "device");
  if (sel.contains("deviceClassName") || (sel.contains("selectors") && !sel["selectors"].empty()))
    rec.selects_nothing = true;
  return rec;
}

std::optional<ClaimRec> ParseClaim(const json& c) {
  if (!c.contains("status") || !c["status"].is_object()) return std::nullopt;
  const json& st = c["status"];
  if (!st.contains("allocation") || !st["allocation"].is_object()) return std::nullopt;
  ClaimRec rec;
  const json& alloc = st["allocation"];
  if (alloc.contains("devices") && alloc["devices"].is_object() &&
      alloc["devices"].contains("results") && alloc["devices"]["results"].is_array()) {
    for (const auto& res : alloc["devices"]["results"]) {
      if (!res.is_object()) continue;
      AllocatedDevice d{
          res.value("driver", ""), res.value("pool", ""), res.value("device", ""), {}};
      if (res.contains("tolerations") && res["tolerations"].is_array()) {
        for (const auto& tol : res["tolerations"]) {
          if (!tol.is_object()) continue;
          DeviceToleration x;
          x.key = tol.value("key", "");
          x.op = tol.value("operator", "Equal");
          x.value = tol.value("value", "");
          x.effect = tol.value("effect", "");
          if (tol.contains("tolerationSeconds") && tol["tolerationSeconds"].is_number_integer())
            x.seconds = tol["tolerationSeconds"].get<std::int64_t>();
          d.tolerations.push_back(std::move(x));
        }
      }
      rec.devices.push_back(std::move(d));
    }
  }
  if (st.contains("reservedFor") && st["reservedFor"].is_array())
    for (const auto& r : st["reservedFor"])
      if (r.is_object() && r.value("resource", "") == "pods" && r.value("apiGroup", "") == "")
        rec.reserved_uids.insert(r.value("uid", ""));
  return rec;
}

// The claim names a pod uses (those that exist yet), in its namespace.
std::vector<std::string> PodClaims(const json& p) {
  std::vector<std::string> out;
  if (!p.contains("spec") || !p["spec"].contains("resourceClaims") ||
      !p["spec"]["resourceClaims"].is_array())
    return out;
  std::map<std::string, std::string> from_status;
  if (p.contains("status") && p["status"].contains("resourceClaimStatuses") &&
      p["status"]["resourceClaimStatuses"].is_array())
    for (const auto& s : p["status"]["resourceClaimStatuses"])
      if (s.is_object() && s.contains("resourceClaimName") && s["resourceClaimName"].is_string())
        from_status[s.value("name", "")] = s["resourceClaimName"].get<std::string>();
  for (const auto& rc : p["spec"]["resourceClaims"]) {
    if (!rc.is_object()) continue;
    if (auto n = OptStr(rc, "resourceClaimName")) {
      out.push_back(*n);
    } else if (rc.contains("resourceClaimTemplateName")) {
      auto it = from_status.find(rc.value("name", ""));
      if (it != from_status.end()) out.push_back(it->second);
    }
  }
  return out;
}

// The newest served version of a resource.k8s.io resource (its storage is shared).
std::shared_ptr<const ResourceInfo> FindDra(Registry& reg, const char* resource) {
  for (const char* v : {"v1", "v1beta2", "v1beta1", "v1alpha3"})
    if (auto ri = reg.Find("resource.k8s.io", v, resource)) return ri;
  return nullptr;
}

// The controller's view of slices, rules, allocated claims and the pods that use them, and
// per pod when it is due for eviction.
class DeviceTaintEviction {
 public:
  DeviceTaintEviction(ApiCore& core, const Controllers& ctl,
                      std::shared_ptr<const ResourceInfo> pods_ri, const ResourceInfo& rules_ri,
                      const ResourceInfo& slices_ri, const ResourceInfo& claims_ri)
      : core_(core),
        ctl_(ctl),
        pods_ri_(std::move(pods_ri)),
        pods_(core.store(), pods_ri_->storage),
        claims_(core.store(), claims_ri.storage),
        slices_(core.store(), slices_ri.storage),
        rules_(core.store(), rules_ri.storage) {}

  void Run(std::stop_token stop);

 private:
  static std::string NsOf(const std::string& key) { return key.substr(0, key.find('/')); }
  void ForgetPod(const std::string& key);
  void AllDirty();
  std::vector<const DeviceTaint*> TaintsOf(const AllocatedDevice& d);
  std::optional<WallTime> ClaimDue(const ClaimRec& c, WallTime now);
  void Evict(const std::string& key);
  bool PopSlices();
  bool PopRules();
  bool PopClaims();
  void PopPods();
  void Reschedule(const std::string& key, WallTime now);

  ApiCore& core_;
  const Controllers& ctl_;
  std::shared_ptr<const ResourceInfo> pods_ri_;
  StoreWatch pods_, claims_, slices_, rules_;
  std::map<std::string, SliceRec> slice_recs_;  // slice name -> record
  std::map<std::string, RuleRec> rule_recs_;    // NoExecute rules by name
  std::map<std::string, ClaimRec> claim_recs_;  // "ns/name" of allocated claims
  std::map<std::string, PodRec> pod_recs_;      // "ns/name" of scheduled active pods with claims
  std::map<std::string, std::set<std::string>> pods_of_claim_;  // claim key -> pod keys
  std::map<std::string, WallTime> first_seen_;  // taint source -> when first seen (no timeAdded)
  std::map<std::string, WallTime> scheduled_;   // pod key -> eviction due
  std::set<std::string> dirty_;                 // pod keys to re-evaluate
};

void DeviceTaintEviction::ForgetPod(const std::string& key) {
  auto it = pod_recs_.find(key);
  if (it != pod_recs_.end()) {
    for (const auto& c : it->second.claims) pods_of_claim_[NsOf(key) + "/" + c].erase(key);
    pod_recs_.erase(it);
  }
  scheduled_.erase(key);
}

void DeviceTaintEviction::AllDirty() {
  for (const auto& [k, _] : pod_recs_) dirty_.insert(k);
}

// The NoExecute taints on one allocated device.
std::vector<const DeviceTaint*> DeviceTaintEviction::TaintsOf(const AllocatedDevice& d) {
  std::vector<const DeviceTaint*> out;
  std::int64_t newest = std::numeric_limits<std::int64_t>::min();
  for (const auto& [_, s] : slice_recs_)
    if (s.driver == d.driver && s.pool == d.pool) newest = std::max(newest, s.generation);
  for (const auto& [_, s] : slice_recs_) {
    if (s.driver != d.driver || s.pool != d.pool || s.generation != newest) continue;
    auto it = s.no_execute.find(d.device);
    if (it == s.no_execute.end()) continue;
    for (const auto& t : it->second) out.push_back(&t);
  }
  for (const auto& [_, r] : rule_recs_) {
    if (r.selects_nothing) continue;
    if ((r.driver && *r.driver != d.driver) || (r.pool && *r.pool != d.pool) ||
        (r.device && *r.device != d.device))
      continue;
    out.push_back(&r.taint);
  }
  return out;
}

// When a claim's pods must go; nullopt when no untolerated NoExecute taint applies.
std::optional<WallTime> DeviceTaintEviction::ClaimDue(const ClaimRec& c, WallTime now) {
  std::optional<WallTime> due;
  for (const auto& d : c.devices) {
    for (const DeviceTaint* t : TaintsOf(d)) {
      WallTime added;
      if (t->time_added) {
        added = *t->time_added;
      } else {
        added = first_seen_.emplace(t->source, now).first->second;
      }
      bool forever = false;
      std::optional<std::int64_t> seconds;
      for (const auto& tol : d.tolerations) {
        if (!tol.Tolerates(*t)) continue;
        if (!tol.seconds) {
          forever = true;
          break;
        }
        const std::int64_t s = std::max<std::int64_t>(0, *tol.seconds);
        seconds = std::min(seconds.value_or(s), s);
      }
      if (forever) continue;
      WallTime at = added;
      if (seconds) at += ctl_.Scaled(std::chrono::milliseconds(*seconds * 1000));
      if (!due || at < *due) due = at;
    }
  }
  return due;
}

void DeviceTaintEviction::Evict(const std::string& key) {
  auto it = pod_recs_.find(key);
  if (it == pod_recs_.end()) return;
  const std::string ns = NsOf(key), name = key.substr(key.find('/') + 1);
  json cond = {{"type", "DisruptionTarget"},
               {"status", "True"},
               {"reason", "DeletionByDeviceTaintManager"},
               {"message", "Device Taint manager: deleting due to NoExecute taint"},
               {"lastTransitionTime", core_.NowRfc3339()}};
  core_.Patch(Target{pods_ri_, ns, name, "status"}, "application/strategic-merge-patch+json",
              {{"status", {{"conditions", {cond}}}}}, WriteOpts{});
  auto r = core_.Delete(Target{pods_ri_, ns, name, ""},
                        {{"preconditions", {{"uid", it->second.uid}}}}, WriteOpts{});
  if (r.ok())
    internal::RecordEvent(core_, it->second.pod, "Normal", "DeviceTaintManagerEviction", "Delete",
                          "Marking for deletion", "device-taint-eviction-controller",
                          "device-taint-eviction-controller");
  ForgetPod(key);
}

// Slices: rare changes. True when a NoExecute taint may have come or gone.
bool DeviceTaintEviction::PopSlices() {
  bool taints_changed = false;
  std::deque<WatchEvent> evs;
  if (!slices_.Pop(evs, std::chrono::milliseconds(0))) slice_recs_.clear();
  for (const auto& e : evs) {
    if (e.type == EventType::kDeleted) {
      taints_changed |= slice_recs_.erase(e.obj->name) > 0;
      continue;
    }
    json s = json::parse(e.obj->json, nullptr, false);
    if (!s.is_object()) continue;
    SliceRec rec = ParseSlice(s, e.obj->name);
    auto it = slice_recs_.find(e.obj->name);
    const bool had_taints = it != slice_recs_.end() && !it->second.no_execute.empty();
    taints_changed |= had_taints || !rec.no_execute.empty() ||
                      (it != slice_recs_.end() && it->second.generation != rec.generation);
    slice_recs_[e.obj->name] = std::move(rec);
  }
  return taints_changed;
}

// Rules: rare changes. True when a NoExecute taint may have come or gone.
bool DeviceTaintEviction::PopRules() {
  bool taints_changed = false;
  std::deque<WatchEvent> evs;
  if (!rules_.Pop(evs, std::chrono::milliseconds(0))) {
    rule_recs_.clear();
    taints_changed = true;
  }
  for (const auto& e : evs) {
    if (e.type == EventType::kDeleted) {
      taints_changed |= rule_recs_.erase(e.obj->name) > 0;
      continue;
    }
    json r = json::parse(e.obj->json, nullptr, false);
    auto rec = r.is_object() ? ParseRule(r, e.obj->name) : std::nullopt;
    if (rec) {
      rule_recs_[e.obj->name] = std::move(*rec);
      taints_changed = true;
    } else {
      taints_changed |= rule_recs_.erase(e.obj->name) > 0;
    }
  }
  return taints_changed;
}

// Claims: a claim's pods are looked at again. True when the watch restarted.
bool DeviceTaintEviction::PopClaims() {
  bool restarted = false;
  std::deque<WatchEvent> evs;
  if (!claims_.Pop(evs, std::chrono::milliseconds(0))) {
    claim_recs_.clear();
    restarted = true;
  }
  for (const auto& e : evs) {
    const std::string key = e.obj->ns + "/" + e.obj->name;
    for (const auto& p : pods_of_claim_[key]) dirty_.insert(p);
    if (e.type == EventType::kDeleted) {
      claim_recs_.erase(key);
      continue;
    }
    json c = json::parse(e.obj->json, nullptr, false);
    auto rec = c.is_object() ? ParseClaim(c) : std::nullopt;
    if (rec) {
      claim_recs_[key] = std::move(*rec);
    } else {
      claim_recs_.erase(key);
    }
  }
  return restarted;
}

// Pods: scheduled, active pods with claims are kept (and looked at), others forgotten.
void DeviceTaintEviction::PopPods() {
  std::deque<WatchEvent> evs;
  if (!pods_.Pop(evs, kPoll)) {
    for (auto& [k, _] : std::map<std::string, PodRec>(pod_recs_)) ForgetPod(k);
  }
  for (const auto& e : evs) {
    const std::string key = e.obj->ns + "/" + e.obj->name;
    if (e.type == EventType::kDeleted) {
      ForgetPod(key);
      continue;
    }
    json p = json::parse(e.obj->json, nullptr, false);
    if (!p.is_object()) continue;
    auto names = PodClaims(p);
    if (Str(p, {"spec", "nodeName"}).empty() || !PodActive(p) || names.empty()) {
      ForgetPod(key);
      continue;
    }
    auto& r = pod_recs_[key];
    for (const auto& c : r.claims) pods_of_claim_[e.obj->ns + "/" + c].erase(key);
    r.uid = Str(p, {"metadata", "uid"});
    r.claims = std::move(names);
    for (const auto& c : r.claims) pods_of_claim_[e.obj->ns + "/" + c].insert(key);
    r.pod = std::move(p);
    dirty_.insert(key);
  }
}

// The pod's eviction time: the earliest of its reserved claims', or none.
void DeviceTaintEviction::Reschedule(const std::string& key, WallTime now) {
  auto it = pod_recs_.find(key);
  if (it == pod_recs_.end()) return;
  std::optional<WallTime> due;
  for (const auto& c : it->second.claims) {
    auto cit = claim_recs_.find(NsOf(key) + "/" + c);
    if (cit == claim_recs_.end()) continue;                          // not allocated
    if (!cit->second.reserved_uids.count(it->second.uid)) continue;  // not this pod's
    auto at = ClaimDue(cit->second, now);
    if (at && (!due || *at < *due)) due = at;
  }
  if (due) {
    scheduled_[key] = *due;
  } else {
    scheduled_.erase(key);  // taint gone or now tolerated: eviction cancelled
  }
}

void DeviceTaintEviction::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    // Slices and rules: rare changes; every pod with claims is looked at again.
    bool taints_changed = PopSlices();
    taints_changed |= PopRules();
    taints_changed |= PopClaims();
    PopPods();
    if (taints_changed) AllDirty();
    const WallTime now = core_.clock().Now();
    for (const auto& key : dirty_) Reschedule(key, now);
    dirty_.clear();
    for (const auto& key : internal::DueKeys(scheduled_, now)) Evict(key);
  }
}

}  // namespace

void Controllers::DeviceTaintEvictionLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto rules_ri = FindDra(core_.registry(), "devicetaintrules");
  auto slices_ri = FindDra(core_.registry(), "resourceslices");
  auto claims_ri = FindDra(core_.registry(), "resourceclaims");
  // Releases without device taints run no such controller.
  if (!pods_ri || !rules_ri || !slices_ri || !claims_ri) return;
  DeviceTaintEviction(core_, *this, pods_ri, *rules_ri, *slices_ri, *claims_ri).Run(stop);
}

}  // namespace gg::sim
