// RemediationRecord JSON codec (nlohmann, no exceptions escape; strict types, field paths).
#include "remediation/record.h"

#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "events/reasons.h"

namespace gg::remediation {

using nlohmann::json;

std::string_view DrainPhaseName(DrainPhase p) {
  switch (p) {
    case DrainPhase::kNone:
      return "None";
    case DrainPhase::kRunning:
      return "Running";
    case DrainPhase::kCompleted:
      return "Completed";
    case DrainPhase::kBlocked:
      return "Blocked";
    case DrainPhase::kCancelled:
      return "Cancelled";
  }
  return "None";
}

std::optional<DrainPhase> ParseDrainPhase(std::string_view s) {
  for (DrainPhase p : {DrainPhase::kNone, DrainPhase::kRunning, DrainPhase::kCompleted,
                       DrainPhase::kBlocked, DrainPhase::kCancelled}) {
    if (DrainPhaseName(p) == s) return p;
  }
  return std::nullopt;
}

namespace {

void PutTime(json& j, const char* key, const std::optional<WallTime>& t) {
  if (t) j[key] = FormatRfc3339(*t);
}

// Typed readers: absent/null leaves the target untouched.
class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}
  const json* Get(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  Status Str(const char* key, std::string* out) const {
    const json* v = Get(key);
    if (!v) return OkStatus();
    if (!v->is_string()) return Err(key, "string");
    *out = v->get<std::string>();
    return OkStatus();
  }
  Status Bool(const char* key, bool* out) const {
    const json* v = Get(key);
    if (!v) return OkStatus();
    if (!v->is_boolean()) return Err(key, "boolean");
    *out = v->get<bool>();
    return OkStatus();
  }
  Status Int(const char* key, int* out) const {
    const json* v = Get(key);
    if (!v) return OkStatus();
    if (!v->is_number_integer()) return Err(key, "integer");
    auto n = v->get<int64_t>();
    if (n < -1000000 || n > 1000000) return Err(key, "small integer");
    *out = int(n);
    return OkStatus();
  }
  Status Time(const char* key, std::optional<WallTime>* out) const {
    const json* v = Get(key);
    if (!v) return OkStatus();
    if (!v->is_string()) return Err(key, "RFC 3339 string");
    auto t = ParseRfc3339(v->get_ref<const std::string&>());
    if (!t.ok()) return Err(key, "RFC 3339 time");
    *out = *t;
    return OkStatus();
  }
  Status Strings(const char* key, std::vector<std::string>* out) const {
    const json* v = Get(key);
    if (!v) return OkStatus();
    if (!v->is_array()) return Err(key, "array of strings");
    out->clear();
    for (const auto& e : *v) {
      if (!e.is_string()) return Err(key, "array of strings");
      out->push_back(e.get<std::string>());
    }
    return OkStatus();
  }
  Status Err(const char* key, const char* want) const {
    return InvalidArgumentError(path_ + "." + key + ": expected " + want);
  }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
};

// The recorded recovery settings, the ungoverned mark, the fence history, quarantine and the
// last manual release.
Status DecodeRepeatFields(const Reader& rd, RemediationRecord& r) {
  if (const json* rec = rd.Get("recovery")) {
    if (!rec->is_object()) return rd.Err("recovery", "object");
    Reader rr(*rec, "record.recovery");
    std::string healthy_for;
    GG_RETURN_IF_ERROR(rr.Str("healthyFor", &healthy_for));
    auto d = ParseDuration(healthy_for);
    if (!d.ok() || *d < Duration::zero()) return rr.Err("healthyFor", "duration");
    r.healthy_for = *d;
    GG_RETURN_IF_ERROR(rr.Bool("automatic", &r.automatic_recovery));
  }
  GG_RETURN_IF_ERROR(rd.Time("ungovernedSince", &r.ungoverned_since));
  std::vector<std::string> fences;
  GG_RETURN_IF_ERROR(rd.Strings("fences", &fences));
  if (fences.size() > kFenceHistoryMax) return rd.Err("fences", "at most 10 times");
  for (const auto& f : fences) {
    auto t = ParseRfc3339(f);
    if (!t.ok()) return rd.Err("fences", "array of RFC 3339 times");
    r.fences.push_back(*t);
  }
  GG_RETURN_IF_ERROR(rd.Bool("quarantined", &r.quarantined));
  GG_RETURN_IF_ERROR(rd.Time("quarantinedAt", &r.quarantined_at));
  GG_RETURN_IF_ERROR(rd.Str("releasedReason", &r.released_reason));
  return rd.Time("releasedAt", &r.released_at);
}

Status DecodeEscalation(const Reader& rd, RemediationRecord& r) {
  const json* e = rd.Get("escalation");
  if (!e) return OkStatus();
  if (!e->is_object()) return rd.Err("escalation", "object");
  Reader er(*e, "record.escalation");
  EscalationRecord x;
  GG_RETURN_IF_ERROR(er.Str("apiVersion", &x.api_version));
  GG_RETURN_IF_ERROR(er.Str("kind", &x.kind));
  GG_RETURN_IF_ERROR(er.Str("namespace", &x.namespace_));
  GG_RETURN_IF_ERROR(er.Str("name", &x.name));
  if (x.api_version.empty() || x.kind.empty() || x.namespace_.empty() || x.name.empty()) {
    return InvalidArgumentError("record.escalation: apiVersion, kind, namespace and name required");
  }
  r.escalation = std::move(x);
  return OkStatus();
}

// deviceTaints[]: our DeviceTaintRules and the devices the driver tainted itself.
Status DecodeDeviceTaints(const Reader& rd, RemediationRecord& r) {
  const json* d = rd.Get("deviceTaints");
  if (!d) return OkStatus();
  if (!d->is_array()) return rd.Err("deviceTaints", "array");
  for (size_t i = 0; i < d->size(); ++i) {
    const json& e = (*d)[i];
    std::string p = "record.deviceTaints[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgumentError(p + ": expected object");
    Reader er(e, p);
    DeviceTaintRecord t;
    std::optional<WallTime> since;
    GG_RETURN_IF_ERROR(er.Str("gpuUUID", &t.gpu_uuid));
    GG_RETURN_IF_ERROR(er.Str("effect", &t.effect));
    GG_RETURN_IF_ERROR(er.Str("ruleName", &t.rule_name));
    GG_RETURN_IF_ERROR(er.Str("device", &t.device));
    GG_RETURN_IF_ERROR(er.Str("driverTaint", &t.driver_taint));
    if (const json* c = er.Get("claims")) {
      if (!c->is_array()) return er.Err("claims", "array");
      for (const auto& k : *c) {
        if (!k.is_string()) return er.Err("claims", "array of strings");
        t.claims.push_back(k.get<std::string>());
      }
    }
    GG_RETURN_IF_ERROR(er.Time("since", &since));
    if (since) t.since = *since;
    r.device_taints.push_back(std::move(t));
  }
  return OkStatus();
}

}  // namespace

std::string EncodeRecord(const RemediationRecord& r) {
  json j;
  j["v"] = r.version;
  if (!r.state.empty()) j["state"] = r.state;
  if (!r.occurrence.empty()) j["occurrence"] = r.occurrence;
  if (!r.policy.empty()) j["policy"] = r.policy;
  if (r.action != api::Action::kNone) j["action"] = std::string(api::ActionName(r.action));
  if (!r.rules.empty()) j["rules"] = r.rules;
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (!r.bad_gpus.empty()) j["badGPUs"] = r.bad_gpus;
  if (r.node_wide) j["nodeWide"] = true;
  PutTime(j, "startedAt", r.started_at);
  PutTime(j, "updatedAt", r.updated_at);
  if (r.dry_run) j["dryRun"] = true;
  if (r.tainted) {
    j["tainted"] = true;
    j["taintEffect"] = r.taint_effect;
  }
  if (r.cordoned) j["cordoned"] = true;
  if (r.drain.phase != DrainPhase::kNone) {
    json d = {{"phase", std::string(DrainPhaseName(r.drain.phase))}};
    PutTime(d, "startedAt", r.drain.started_at);
    PutTime(d, "finishedAt", r.drain.finished_at);
    if (!r.drain.message.empty()) d["message"] = r.drain.message;
    j["drain"] = d;
  }
  if (!r.device_taints.empty()) {
    json arr = json::array();
    for (const auto& d : r.device_taints) {
      json e = {{"gpuUUID", d.gpu_uuid}, {"effect", d.effect}, {"since", FormatRfc3339(d.since)}};
      if (!d.rule_name.empty()) e["ruleName"] = d.rule_name;
      if (!d.device.empty()) e["device"] = d.device;
      if (!d.driver_taint.empty()) e["driverTaint"] = d.driver_taint;
      if (!d.claims.empty()) e["claims"] = d.claims;
      arr.push_back(e);
    }
    j["deviceTaints"] = arr;
  }
  if (const auto& x = r.escalation) {
    j["escalation"] = {{"apiVersion", x->api_version},
                       {"kind", x->kind},
                       {"namespace", x->namespace_},
                       {"name", x->name}};
  }
  if (r.cancelled) j["cancelled"] = true;
  PutTime(j, "cancelledAt", r.cancelled_at);
  if (!r.skipped.empty()) j["skipped"] = r.skipped;
  PutTime(j, "recoveredAt", r.recovered_at);
  if (r.healthy_for) {
    j["recovery"] = {{"healthyFor", FormatDuration(*r.healthy_for)}};
    if (!r.automatic_recovery) j["recovery"]["automatic"] = false;
  }
  PutTime(j, "ungovernedSince", r.ungoverned_since);
  if (!r.fences.empty()) {
    json arr = json::array();
    for (const auto& t : r.fences) arr.push_back(FormatRfc3339(t));
    j["fences"] = arr;
  }
  if (r.quarantined) j["quarantined"] = true;
  PutTime(j, "quarantinedAt", r.quarantined_at);
  if (!r.released_reason.empty()) j["releasedReason"] = r.released_reason;
  PutTime(j, "releasedAt", r.released_at);
  if (!r.memory.empty()) {
    json m = json::object();
    for (const auto& [name, mem] : r.memory) {
      json e;
      policy::EvalMemoryToJson(mem, e);
      m[name] = e;
    }
    j["memory"] = m;
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

StatusOr<RemediationRecord> DecodeRecord(std::string_view text) {
  json j;
  GG_RETURN_IF_ERROR(policy::ParseJsonBounded(text, j));
  if (!j.is_object()) return InvalidArgumentError("record: expected object");
  Reader rd(j, "record");
  RemediationRecord r;
  r.version = 0;
  GG_RETURN_IF_ERROR(rd.Int("v", &r.version));
  if (r.version != kRecordVersion) {
    return InvalidArgumentError("record.v: unsupported version " + std::to_string(r.version));
  }
  GG_RETURN_IF_ERROR(rd.Str("state", &r.state));
  GG_RETURN_IF_ERROR(rd.Str("occurrence", &r.occurrence));
  GG_RETURN_IF_ERROR(rd.Str("policy", &r.policy));
  std::string action;
  GG_RETURN_IF_ERROR(rd.Str("action", &action));
  if (!action.empty()) {
    auto a = api::ParseAction(action);
    if (!a) return InvalidArgumentError("record.action: unknown action \"" + action + "\"");
    r.action = *a;
  }
  GG_RETURN_IF_ERROR(rd.Strings("rules", &r.rules));
  GG_RETURN_IF_ERROR(rd.Str("reason", &r.reason));
  GG_RETURN_IF_ERROR(rd.Strings("badGPUs", &r.bad_gpus));
  GG_RETURN_IF_ERROR(rd.Bool("nodeWide", &r.node_wide));
  GG_RETURN_IF_ERROR(rd.Time("startedAt", &r.started_at));
  GG_RETURN_IF_ERROR(rd.Time("updatedAt", &r.updated_at));
  GG_RETURN_IF_ERROR(rd.Bool("dryRun", &r.dry_run));
  GG_RETURN_IF_ERROR(rd.Bool("tainted", &r.tainted));
  GG_RETURN_IF_ERROR(rd.Str("taintEffect", &r.taint_effect));
  GG_RETURN_IF_ERROR(rd.Bool("cordoned", &r.cordoned));
  if (const json* d = rd.Get("drain")) {
    if (!d->is_object()) return rd.Err("drain", "object");
    Reader dr(*d, "record.drain");
    std::string phase;
    GG_RETURN_IF_ERROR(dr.Str("phase", &phase));
    auto p = ParseDrainPhase(phase.empty() ? "None" : phase);
    if (!p) return InvalidArgumentError("record.drain.phase: unknown phase \"" + phase + "\"");
    r.drain.phase = *p;
    GG_RETURN_IF_ERROR(dr.Time("startedAt", &r.drain.started_at));
    GG_RETURN_IF_ERROR(dr.Time("finishedAt", &r.drain.finished_at));
    GG_RETURN_IF_ERROR(dr.Str("message", &r.drain.message));
  }
  GG_RETURN_IF_ERROR(DecodeDeviceTaints(rd, r));
  GG_RETURN_IF_ERROR(rd.Bool("cancelled", &r.cancelled));
  GG_RETURN_IF_ERROR(rd.Time("cancelledAt", &r.cancelled_at));
  GG_RETURN_IF_ERROR(rd.Str("skipped", &r.skipped));
  GG_RETURN_IF_ERROR(rd.Time("recoveredAt", &r.recovered_at));
  GG_RETURN_IF_ERROR(DecodeRepeatFields(rd, r));
  GG_RETURN_IF_ERROR(DecodeEscalation(rd, r));
  if (const json* m = rd.Get("memory")) {
    if (!m->is_object()) return rd.Err("memory", "object");
    for (auto it = m->begin(); it != m->end(); ++it) {
      auto mem = policy::EvalMemoryFromJson(it.value(), "record.memory." + it.key());
      if (!mem.ok()) return mem.status();
      r.memory[it.key()] = std::move(*mem);
    }
  }
  return r;
}

std::string MarkDrainCompleted(RemediationRecord& r, WallTime now) {
  r.drain.phase = DrainPhase::kCompleted;
  r.drain.finished_at = now;
  r.drain.message.clear();
  r.updated_at = now;
  return events::kNodeDrained;
}

std::string MarkDrainBlocked(RemediationRecord& r, std::string message, WallTime now) {
  r.drain.phase = DrainPhase::kBlocked;
  r.drain.finished_at = now;
  r.drain.message = std::move(message);
  r.updated_at = now;
  return events::kDrainBlocked;
}

}  // namespace gg::remediation
