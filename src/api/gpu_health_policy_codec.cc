// GPUHealthPolicy JSON codecs: simdjson DOM decode (strict types, field-path errors, unknown
// fields ignored, absent fields defaulted) and nlohmann encode (full resource and status).
#include <simdjson.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "api/gpu_health_policy.h"
#include "api/gpu_node_health.h"
#include "common/time_util.h"

namespace gg::api {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

Status TypeError(const std::string& path, std::string_view want) {
  return InvalidArgumentError(path + ": expected " + std::string(want));
}

// Looks up `key`; null counts as absent. Returns false when absent.
bool Find(const object& o, std::string_view key, element* out) {
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS) return false;
  if (e.type() == element_type::NULL_VALUE) return false;
  *out = e;
  return true;
}

Status AsObject(const element& e, const std::string& path, object* out) {
  if (e.type() != element_type::OBJECT) return TypeError(path, "object");
  if (e.get_object().get(*out) != simdjson::SUCCESS) return TypeError(path, "object");
  return OkStatus();
}

Status AsInt64(const element& e, const std::string& path, int64_t* out) {
  if (e.type() == element_type::INT64) {
    *out = e.get_int64().value_unsafe();
    return OkStatus();
  }
  if (e.type() == element_type::UINT64) return TypeError(path, "integer within int64 range");
  return TypeError(path, "integer");
}

Status AsUint64(const element& e, const std::string& path, uint64_t* out) {
  if (e.type() == element_type::UINT64) {
    *out = e.get_uint64().value_unsafe();
    return OkStatus();
  }
  if (e.type() == element_type::INT64) {
    int64_t v = e.get_int64().value_unsafe();
    if (v < 0) return TypeError(path, "non-negative integer");
    *out = uint64_t(v);
    return OkStatus();
  }
  return TypeError(path, "non-negative integer");
}

template <typename Int>
Status AsInt(const element& e, const std::string& path, Int* out) {
  int64_t v = 0;
  GG_RETURN_IF_ERROR(AsInt64(e, path, &v));
  if (v < int64_t(std::numeric_limits<Int>::min()) ||
      v > int64_t(std::numeric_limits<Int>::max())) {
    return TypeError(path, "integer in range");
  }
  *out = Int(v);
  return OkStatus();
}

Status AsString(const element& e, const std::string& path, std::string* out) {
  if (e.type() != element_type::STRING) return TypeError(path, "string");
  *out = std::string(e.get_string().value_unsafe());
  return OkStatus();
}

Status AsBool(const element& e, const std::string& path, bool* out) {
  if (e.type() != element_type::BOOL) return TypeError(path, "boolean");
  *out = e.get_bool().value_unsafe();
  return OkStatus();
}

Status AsDuration(const element& e, const std::string& path, Duration* out) {
  std::string s;
  GG_RETURN_IF_ERROR(AsString(e, path, &s));
  auto d = ParseDuration(s);
  if (!d.ok()) return InvalidArgumentError(path + ": invalid duration \"" + s + "\"");
  *out = *d;
  return OkStatus();
}

Status AsTime(const element& e, const std::string& path, WallTime* out) {
  std::string s;
  GG_RETURN_IF_ERROR(AsString(e, path, &s));
  auto t = ParseRfc3339(s);
  if (!t.ok()) return InvalidArgumentError(path + ": invalid RFC 3339 time \"" + s + "\"");
  *out = *t;
  return OkStatus();
}

template <typename T, typename Fn>
Status AsList(const element& e, const std::string& path, std::vector<T>* out, Fn each) {
  if (e.type() != element_type::ARRAY) return TypeError(path, "array");
  out->clear();
  size_t i = 0;
  simdjson::dom::array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) return TypeError(path, "array");
  for (element item : arr) {
    T v{};
    GG_RETURN_IF_ERROR(each(item, path + "[" + std::to_string(i) + "]", &v));
    out->push_back(std::move(v));
    ++i;
  }
  return OkStatus();
}

Status AsStringList(const element& e, const std::string& path, std::vector<std::string>* out) {
  return AsList(e, path, out, AsString);
}
Status AsIntList(const element& e, const std::string& path, std::vector<int>* out) {
  return AsList(e, path, out, AsInt<int>);
}

// Reads an optional field into `out` (left untouched when absent) with decoder `fn`.
template <typename T, typename Fn>
Status Field(const object& o, std::string_view key, const std::string& path, T* out, Fn fn) {
  element e;
  if (!Find(o, key, &e)) return OkStatus();
  return fn(e, path + "." + std::string(key), out);
}
template <typename T, typename Fn>
Status OptField(const object& o, std::string_view key, const std::string& path,
                std::optional<T>* out, Fn fn) {
  element e;
  if (!Find(o, key, &e)) return OkStatus();
  T v{};
  GG_RETURN_IF_ERROR(fn(e, path + "." + std::string(key), &v));
  *out = std::move(v);
  return OkStatus();
}

template <typename E, typename Parse>
auto EnumDecoder(Parse parse, std::string_view allowed) {
  return [parse, allowed](const element& e, const std::string& path, E* out) -> Status {
    std::string s;
    GG_RETURN_IF_ERROR(AsString(e, path, &s));
    auto v = parse(s);
    if (!v)
      return InvalidArgumentError(path + ": must be one of " + std::string(allowed) + ", got \"" +
                                  s + "\"");
    *out = *v;
    return OkStatus();
  };
}

Status AsIntOrPercent(const element& e, const std::string& path, IntOrPercent* out) {
  if (e.type() == element_type::INT64 || e.type() == element_type::UINT64) {
    int64_t v = 0;
    GG_RETURN_IF_ERROR(AsInt64(e, path, &v));
    *out = IntOrPercent{v, false};
    return OkStatus();
  }
  std::string s;
  if (!AsString(e, path, &s).ok()) return TypeError(path, "integer or percentage string");
  auto v = ParseIntOrPercent(s);
  if (!v.ok()) return InvalidArgumentError(path + ": " + v.status().message());
  *out = *v;
  return OkStatus();
}

Status DecodeSelector(const element& e, const std::string& path, LabelSelector* out) {
  object o;
  GG_RETURN_IF_ERROR(AsObject(e, path, &o));
  *out = LabelSelector{};  // present replaces the default
  element ml;
  if (Find(o, "matchLabels", &ml)) {
    object mlo;
    GG_RETURN_IF_ERROR(AsObject(ml, path + ".matchLabels", &mlo));
    for (auto [k, v] : mlo) {
      std::string s;
      GG_RETURN_IF_ERROR(AsString(v, path + ".matchLabels." + std::string(k), &s));
      out->match_labels[std::string(k)] = s;
    }
  }
  return Field(
      o, "matchExpressions", path, &out->match_expressions,
      [](const element& e, const std::string& p, std::vector<LabelSelectorRequirement>* v) {
        return AsList(
            e, p, v,
            [](const element& item, const std::string& ip, LabelSelectorRequirement* r) -> Status {
              object ro;
              GG_RETURN_IF_ERROR(AsObject(item, ip, &ro));
              GG_RETURN_IF_ERROR(Field(ro, "key", ip, &r->key, AsString));
              GG_RETURN_IF_ERROR(Field(ro, "operator", ip, &r->op, AsString));
              return Field(ro, "values", ip, &r->values, AsStringList);
            });
      });
}

Status DecodeDrainStep(const element& item, const std::string& path, DrainStep* s) {
  object o;
  GG_RETURN_IF_ERROR(AsObject(item, path, &o));
  GG_RETURN_IF_ERROR(OptField(o, "priorityBelow", path, &s->priority_below, AsInt<int32_t>));
  return OptField(o, "podSelector", path, &s->pod_selector, DecodeSelector);
}

// Decodes the optional sub-object `key` of `o` into `*out` with `fill(object, path, T*)`.
template <typename T, typename Fill>
Status OptObject(const object& o, std::string_view key, const std::string& path,
                 std::optional<T>* out, Fill fill) {
  element m;
  if (!Find(o, key, &m)) return OkStatus();
  const std::string p = path + "." + std::string(key);
  object mo;
  GG_RETURN_IF_ERROR(AsObject(m, p, &mo));
  T x{};
  GG_RETURN_IF_ERROR(fill(mo, p, &x));
  *out = std::move(x);
  return OkStatus();
}

// Thermal, NVLink, Node-condition and power matchers of a rule.
Status DecodeLevelMatchers(const object& o, const std::string& path, Rule* r) {
  GG_RETURN_IF_ERROR(
      OptObject(o, "thermal", path, &r->thermal,
                [](const object& mo, const std::string& p, ThermalMatcher* x) {
                  GG_RETURN_IF_ERROR(OptField(mo, "temperatureAboveCelsius", p,
                                              &x->temperature_above_celsius, AsInt<int>));
                  return Field(mo, "throttleReasons", p, &x->throttle_reasons, AsStringList);
                }));
  GG_RETURN_IF_ERROR(OptObject(
      o, "nvlink", path, &r->nvlink, [](const object& mo, const std::string& p, NvlinkMatcher* x) {
        GG_RETURN_IF_ERROR(OptField(mo, "linksDownAbove", p, &x->links_down_above, AsInt<int>));
        return OptField(mo, "errorsAbove", p, &x->errors_above, AsUint64);
      }));
  GG_RETURN_IF_ERROR(OptObject(o, "nodeCondition", path, &r->node_condition,
                               [](const object& mo, const std::string& p, NodeConditionMatcher* x) {
                                 GG_RETURN_IF_ERROR(Field(mo, "type", p, &x->type, AsString));
                                 return Field(mo, "status", p, &x->status, AsString);
                               }));
  return OptObject(o, "power", path, &r->power,
                   [](const object& mo, const std::string& p, PowerMatcher* x) {
                     return Field(mo, "overLimitPercent", p, &x->over_limit_percent, AsInt<int>);
                   });
}

Status DecodeRule(const element& e, const std::string& path, Rule* r) {
  object o;
  GG_RETURN_IF_ERROR(AsObject(e, path, &o));
  GG_RETURN_IF_ERROR(Field(o, "name", path, &r->name, AsString));
  element m;
  if (Find(o, "xid", &m)) {
    std::string p = path + ".xid";
    object mo;
    GG_RETURN_IF_ERROR(AsObject(m, p, &mo));
    XidMatcher x;
    GG_RETURN_IF_ERROR(Field(mo, "catalogActions", p, &x.catalog_actions, AsStringList));
    GG_RETURN_IF_ERROR(Field(mo, "codes", p, &x.codes, AsIntList));
    GG_RETURN_IF_ERROR(Field(mo, "ignore", p, &x.ignore, AsIntList));
    GG_RETURN_IF_ERROR(Field(mo, "sxid", p, &x.sxid, AsBool));
    r->xid = x;
  }
  if (Find(o, "ecc", &m)) {
    std::string p = path + ".ecc";
    object mo;
    GG_RETURN_IF_ERROR(AsObject(m, p, &mo));
    EccMatcher x;
    GG_RETURN_IF_ERROR(
        OptField(mo, "uncorrectableVolatileAbove", p, &x.uncorrectable_volatile_above, AsUint64));
    GG_RETURN_IF_ERROR(
        OptField(mo, "correctableVolatileAbove", p, &x.correctable_volatile_above, AsUint64));
    GG_RETURN_IF_ERROR(
        OptField(mo, "uncorrectableAggregateAbove", p, &x.uncorrectable_aggregate_above, AsUint64));
    GG_RETURN_IF_ERROR(OptField(mo, "correctableVolatileIncreaseAbove", p,
                                &x.correctable_volatile_increase_above, AsUint64));
    r->ecc = x;
  }
  if (Find(o, "remappedRows", &m)) {
    std::string p = path + ".remappedRows";
    object mo;
    GG_RETURN_IF_ERROR(AsObject(m, p, &mo));
    RemappedRowsMatcher x;
    GG_RETURN_IF_ERROR(Field(mo, "failure", p, &x.failure, AsBool));
    GG_RETURN_IF_ERROR(Field(mo, "pending", p, &x.pending, AsBool));
    GG_RETURN_IF_ERROR(
        OptField(mo, "uncorrectableAbove", p, &x.uncorrectable_above, AsInt<uint32_t>));
    r->remapped_rows = x;
  }
  if (Find(o, "retiredPages", &m)) {
    std::string p = path + ".retiredPages";
    object mo;
    GG_RETURN_IF_ERROR(AsObject(m, p, &mo));
    RetiredPagesMatcher x;
    GG_RETURN_IF_ERROR(OptField(mo, "dbeAbove", p, &x.dbe_above, AsInt<uint32_t>));
    GG_RETURN_IF_ERROR(OptField(mo, "sbeAbove", p, &x.sbe_above, AsInt<uint32_t>));
    GG_RETURN_IF_ERROR(Field(mo, "pending", p, &x.pending, AsBool));
    r->retired_pages = x;
  }
  GG_RETURN_IF_ERROR(DecodeLevelMatchers(o, path, r));
  GG_RETURN_IF_ERROR(Field(o, "gpuLost", path, &r->gpu_lost, AsBool));
  GG_RETURN_IF_ERROR(Field(o, "gpuMissing", path, &r->gpu_missing, AsBool));
  GG_RETURN_IF_ERROR(OptField(o, "pcieReplayAbove", path, &r->pcie_replay_above, AsUint64));
  GG_RETURN_IF_ERROR(Field(o, "recoveryActions", path, &r->recovery_actions, AsStringList));
  GG_RETURN_IF_ERROR(Field(o, "count", path, &r->count, AsInt64));
  GG_RETURN_IF_ERROR(OptField(o, "window", path, &r->window, AsDuration));
  GG_RETURN_IF_ERROR(OptField(o, "for", path, &r->for_, AsDuration));
  return Field(o, "action", path, &r->action,
               EnumDecoder<Action>(ParseAction, "None, Event, Taint, Cordon, Drain"));
}

// spec.remediation.escalate: {template: {apiVersion, kind, namespace, name}}.
Status DecodeEscalate(const object& so, const std::string& p,
                      std::optional<EscalationTemplate>* out) {
  element ee;
  if (!Find(so, "escalate", &ee)) return OkStatus();
  const std::string ep = p + ".escalate";
  object eo;
  GG_RETURN_IF_ERROR(AsObject(ee, ep, &eo));
  element te;
  if (!Find(eo, "template", &te)) return InvalidArgumentError(ep + ".template: required");
  const std::string tp = ep + ".template";
  object to;
  GG_RETURN_IF_ERROR(AsObject(te, tp, &to));
  EscalationTemplate t;
  GG_RETURN_IF_ERROR(Field(to, "apiVersion", tp, &t.api_version, AsString));
  GG_RETURN_IF_ERROR(Field(to, "kind", tp, &t.kind, AsString));
  GG_RETURN_IF_ERROR(Field(to, "namespace", tp, &t.namespace_, AsString));
  GG_RETURN_IF_ERROR(Field(to, "name", tp, &t.name, AsString));
  *out = std::move(t);
  return OkStatus();
}

// spec.recovery onto the defaults in `r` (absent fields keep them).
Status DecodeRecovery(const element& e, const std::string& p, RecoverySpec* r) {
  object so;
  GG_RETURN_IF_ERROR(AsObject(e, p, &so));
  GG_RETURN_IF_ERROR(Field(so, "automatic", p, &r->automatic, AsBool));
  GG_RETURN_IF_ERROR(Field(so, "healthyFor", p, &r->healthy_for, AsDuration));
  element qe;
  if (!Find(so, "quarantine", &qe)) return OkStatus();
  const std::string qp = p + ".quarantine";
  object qo;
  GG_RETURN_IF_ERROR(AsObject(qe, qp, &qo));
  GG_RETURN_IF_ERROR(Field(qo, "after", qp, &r->quarantine.after, AsInt<int>));
  return Field(qo, "within", qp, &r->quarantine.within, AsDuration);
}

Status DecodeSpecObject(const element& e, const std::string& path, GpuHealthPolicySpec* spec) {
  object o;
  GG_RETURN_IF_ERROR(AsObject(e, path, &o));
  *spec = DefaultPolicySpec();  // absent fields (rules, selector, ...) -> the defaults
  GG_RETURN_IF_ERROR(Field(o, "nodeSelector", path, &spec->node_selector, DecodeSelector));
  GG_RETURN_IF_ERROR(Field(o, "rules", path, &spec->rules,
                           [](const element& e, const std::string& p, std::vector<Rule>* v) {
                             return AsList(e, p, v, DecodeRule);
                           }));
  element sub;
  object so;
  if (Find(o, "unknown", &sub)) {
    std::string p = path + ".unknown";
    GG_RETURN_IF_ERROR(AsObject(sub, p, &so));
    GG_RETURN_IF_ERROR(Field(so, "after", p, &spec->unknown.after, AsDuration));
    GG_RETURN_IF_ERROR(
        Field(so, "action", p, &spec->unknown.action,
              EnumDecoder<Action>(ParseAction, "None, Event, Taint, Cordon, Drain")));
  }
  if (Find(o, "remediation", &sub)) {
    std::string p = path + ".remediation";
    GG_RETURN_IF_ERROR(AsObject(sub, p, &so));
    RemediationSpec& rem = spec->remediation;
    element t;
    if (Find(so, "taint", &t)) {
      object to;
      GG_RETURN_IF_ERROR(AsObject(t, p + ".taint", &to));
      GG_RETURN_IF_ERROR(Field(
          to, "effect", p + ".taint", &rem.taint_effect,
          EnumDecoder<TaintEffect>(ParseTaintEffect, "NoSchedule, PreferNoSchedule, NoExecute")));
    }
    if (Find(so, "drain", &t)) {
      std::string dp = p + ".drain";
      object dobj;
      GG_RETURN_IF_ERROR(AsObject(t, dp, &dobj));
      DrainSpec& d = rem.drain;
      GG_RETURN_IF_ERROR(Field(dobj, "scope", dp, &d.scope,
                               EnumDecoder<DrainScope>(ParseDrainScope, "GPUPods, AllPods")));
      GG_RETURN_IF_ERROR(
          Field(dobj, "order", dp, &d.order,
                [](const element& e, const std::string& op, std::vector<DrainStep>* v) {
                  return AsList(e, op, v, DecodeDrainStep);
                }));
      GG_RETURN_IF_ERROR(
          OptField(dobj, "gracePeriodSeconds", dp, &d.grace_period_seconds, AsInt64));
      GG_RETURN_IF_ERROR(Field(dobj, "timeout", dp, &d.timeout, AsDuration));
      GG_RETURN_IF_ERROR(Field(dobj, "deleteEmptyDirData", dp, &d.delete_empty_dir_data, AsBool));
      GG_RETURN_IF_ERROR(Field(dobj, "force", dp, &d.force, AsBool));
    }
    GG_RETURN_IF_ERROR(Field(so, "deviceLevel", p, &rem.device_level,
                             EnumDecoder<DeviceLevelMode>(ParseDeviceLevelMode, "Auto, Off")));
    GG_RETURN_IF_ERROR(
        Field(so, "maxBadGPUsForDeviceLevel", p, &rem.max_bad_gpus_for_device_level, AsInt<int>));
    GG_RETURN_IF_ERROR(Field(
        so, "deviceTaintEffect", p, &rem.device_taint_effect,
        EnumDecoder<DeviceTaintEffect>(ParseDeviceTaintEffect, "None, NoSchedule, NoExecute")));
    GG_RETURN_IF_ERROR(Field(so, "deviceDriver", p, &rem.device_driver, AsString));
    GG_RETURN_IF_ERROR(Field(so, "claimStatus", p, &rem.claim_status, AsBool));
    GG_RETURN_IF_ERROR(DecodeEscalate(so, p, &rem.escalate));
  }
  GG_RETURN_IF_ERROR(Field(o, "recovery", path, &spec->recovery, DecodeRecovery));
  if (Find(o, "safety", &sub)) {
    std::string p = path + ".safety";
    GG_RETURN_IF_ERROR(AsObject(sub, p, &so));
    SafetySpec& s = spec->safety;
    GG_RETURN_IF_ERROR(Field(so, "maxUnhealthy", p, &s.max_unhealthy, AsIntOrPercent));
    GG_RETURN_IF_ERROR(OptField(so, "maxNodesPerHour", p, &s.max_nodes_per_hour, AsInt64));
    GG_RETURN_IF_ERROR(OptField(so, "maxConcurrentDrains", p, &s.max_concurrent_drains, AsInt64));
    GG_RETURN_IF_ERROR(OptField(so, "maxDevicesPerHour", p, &s.max_devices_per_hour, AsInt64));
  }
  GG_RETURN_IF_ERROR(Field(o, "dryRun", path, &spec->dry_run, AsBool));
  return Field(o, "paused", path, &spec->paused, AsBool);
}

Status DecodeStatusObject(const element& e, const std::string& path, GpuHealthPolicyStatus* st) {
  object o;
  GG_RETURN_IF_ERROR(AsObject(e, path, &o));
  GG_RETURN_IF_ERROR(Field(o, "observedGeneration", path, &st->observed_generation, AsInt64));
  GG_RETURN_IF_ERROR(Field(
      o, "conditions", path, &st->conditions,
      [](const element& e, const std::string& p, std::vector<PolicyCondition>* v) {
        return AsList(e, p, v, [](const element& item, const std::string& ip, PolicyCondition* c) {
          object co;
          GG_RETURN_IF_ERROR(AsObject(item, ip, &co));
          GG_RETURN_IF_ERROR(Field(co, "type", ip, &c->type, AsString));
          GG_RETURN_IF_ERROR(Field(co, "status", ip, &c->status, AsString));
          GG_RETURN_IF_ERROR(Field(co, "reason", ip, &c->reason, AsString));
          GG_RETURN_IF_ERROR(Field(co, "message", ip, &c->message, AsString));
          GG_RETURN_IF_ERROR(Field(co, "lastTransitionTime", ip, &c->last_transition_time, AsTime));
          return Field(co, "observedGeneration", ip, &c->observed_generation, AsInt64);
        });
      }));
  GG_RETURN_IF_ERROR(Field(o, "matchedNodes", path, &st->matched_nodes, AsInt64));
  GG_RETURN_IF_ERROR(Field(o, "healthyNodes", path, &st->healthy_nodes, AsInt64));
  GG_RETURN_IF_ERROR(Field(o, "unhealthyNodes", path, &st->unhealthy_nodes, AsInt64));
  GG_RETURN_IF_ERROR(Field(o, "unknownNodes", path, &st->unknown_nodes, AsInt64));
  GG_RETURN_IF_ERROR(Field(o, "remediatingNodes", path, &st->remediating_nodes, AsInt64));
  return OptField(o, "lastBrakeTime", path, &st->last_brake_time, AsTime);
}

StatusOr<element> ParseRoot(simdjson::dom::parser& parser, std::string_view json) {
  element root;
  auto err = parser.parse(json.data(), json.size()).get(root);
  if (err)
    return InvalidArgumentError(std::string("invalid JSON: ") + simdjson::error_message(err));
  return root;
}

// ---- encode ----

using nlohmann::json;

// FormatDuration is readable but may round sub-millisecond parts; fall back to exact ns.
std::string Dur(Duration d) {
  std::string s = FormatDuration(d);
  auto back = ParseDuration(s);
  if (back.ok() && *back == d) return s;
  return std::to_string(d.count()) + "ns";
}

json EncodeRule(const Rule& r) {
  json j;
  j["name"] = r.name;
  if (r.xid) {
    json x = json::object();
    if (!r.xid->catalog_actions.empty()) x["catalogActions"] = r.xid->catalog_actions;
    if (!r.xid->codes.empty()) x["codes"] = r.xid->codes;
    if (!r.xid->ignore.empty()) x["ignore"] = r.xid->ignore;
    if (r.xid->sxid) x["sxid"] = true;
    j["xid"] = x;
  }
  if (r.ecc) {
    json x = json::object();
    if (r.ecc->uncorrectable_volatile_above)
      x["uncorrectableVolatileAbove"] = *r.ecc->uncorrectable_volatile_above;
    if (r.ecc->correctable_volatile_above)
      x["correctableVolatileAbove"] = *r.ecc->correctable_volatile_above;
    if (r.ecc->uncorrectable_aggregate_above)
      x["uncorrectableAggregateAbove"] = *r.ecc->uncorrectable_aggregate_above;
    if (r.ecc->correctable_volatile_increase_above) {
      x["correctableVolatileIncreaseAbove"] = *r.ecc->correctable_volatile_increase_above;
    }
    j["ecc"] = x;
  }
  if (r.remapped_rows) {
    json x = json::object();
    if (r.remapped_rows->failure) x["failure"] = true;
    if (r.remapped_rows->pending) x["pending"] = true;
    if (r.remapped_rows->uncorrectable_above)
      x["uncorrectableAbove"] = *r.remapped_rows->uncorrectable_above;
    j["remappedRows"] = x;
  }
  if (r.retired_pages) {
    json x = json::object();
    if (r.retired_pages->dbe_above) x["dbeAbove"] = *r.retired_pages->dbe_above;
    if (r.retired_pages->sbe_above) x["sbeAbove"] = *r.retired_pages->sbe_above;
    if (r.retired_pages->pending) x["pending"] = true;
    j["retiredPages"] = x;
  }
  if (r.thermal) {
    json x = json::object();
    if (r.thermal->temperature_above_celsius)
      x["temperatureAboveCelsius"] = *r.thermal->temperature_above_celsius;
    if (!r.thermal->throttle_reasons.empty()) x["throttleReasons"] = r.thermal->throttle_reasons;
    j["thermal"] = x;
  }
  if (r.gpu_lost) j["gpuLost"] = true;
  if (r.gpu_missing) j["gpuMissing"] = true;
  if (r.nvlink) {
    json x = json::object();
    if (r.nvlink->links_down_above) x["linksDownAbove"] = *r.nvlink->links_down_above;
    if (r.nvlink->errors_above) x["errorsAbove"] = *r.nvlink->errors_above;
    j["nvlink"] = x;
  }
  if (r.node_condition) {
    j["nodeCondition"] = {{"type", r.node_condition->type}, {"status", r.node_condition->status}};
  }
  if (r.power) j["power"] = {{"overLimitPercent", r.power->over_limit_percent}};
  if (r.pcie_replay_above) j["pcieReplayAbove"] = *r.pcie_replay_above;
  if (!r.recovery_actions.empty()) j["recoveryActions"] = r.recovery_actions;
  if (r.xid || r.count != 1) j["count"] = r.count;
  if (r.window) j["window"] = Dur(*r.window);
  if (r.for_) j["for"] = Dur(*r.for_);
  j["action"] = std::string(ActionName(r.action));
  return j;
}

json EncodeSelector(const LabelSelector& s) {
  json sel = json::object();
  if (!s.match_labels.empty()) sel["matchLabels"] = s.match_labels;
  if (!s.match_expressions.empty()) {
    json exprs = json::array();
    for (const auto& r : s.match_expressions) {
      json e = {{"key", r.key}, {"operator", r.op}};
      if (!r.values.empty()) e["values"] = r.values;
      exprs.push_back(e);
    }
    sel["matchExpressions"] = exprs;
  }
  return sel;
}

json EncodeSpec(const GpuHealthPolicySpec& s) {
  json j;
  j["nodeSelector"] = EncodeSelector(s.node_selector);
  json rules = json::array();
  for (const auto& r : s.rules) rules.push_back(EncodeRule(r));
  j["rules"] = rules;
  j["unknown"] = {{"after", Dur(s.unknown.after)},
                  {"action", std::string(ActionName(s.unknown.action))}};
  const DrainSpec& d = s.remediation.drain;
  json order = json::array();
  for (const auto& st : d.order) {
    json o = json::object();
    if (st.priority_below) o["priorityBelow"] = *st.priority_below;
    if (st.pod_selector) o["podSelector"] = EncodeSelector(*st.pod_selector);
    order.push_back(o);
  }
  json drain = {{"scope", std::string(DrainScopeName(d.scope))},
                {"order", order},
                {"timeout", Dur(d.timeout)},
                {"deleteEmptyDirData", d.delete_empty_dir_data},
                {"force", d.force}};
  if (d.grace_period_seconds) drain["gracePeriodSeconds"] = *d.grace_period_seconds;
  j["remediation"] = {
      {"taint", {{"effect", std::string(TaintEffectName(s.remediation.taint_effect))}}},
      {"drain", drain},
      {"deviceLevel", std::string(DeviceLevelModeName(s.remediation.device_level))},
      {"maxBadGPUsForDeviceLevel", s.remediation.max_bad_gpus_for_device_level},
      {"deviceTaintEffect", std::string(DeviceTaintEffectName(s.remediation.device_taint_effect))},
      {"deviceDriver", s.remediation.device_driver},
      {"claimStatus", s.remediation.claim_status}};
  if (const auto& t = s.remediation.escalate) {
    j["remediation"]["escalate"] = {{"template",
                                     {{"apiVersion", t->api_version},
                                      {"kind", t->kind},
                                      {"namespace", t->namespace_},
                                      {"name", t->name}}}};
  }
  j["recovery"] = {
      {"automatic", s.recovery.automatic},
      {"healthyFor", Dur(s.recovery.healthy_for)},
      {"quarantine",
       {{"after", s.recovery.quarantine.after}, {"within", Dur(s.recovery.quarantine.within)}}}};
  json safety = json::object();
  if (s.safety.max_unhealthy.percent) {
    safety["maxUnhealthy"] = s.safety.max_unhealthy.ToString();
  } else {
    safety["maxUnhealthy"] = s.safety.max_unhealthy.value;
  }
  if (s.safety.max_nodes_per_hour) safety["maxNodesPerHour"] = *s.safety.max_nodes_per_hour;
  if (s.safety.max_concurrent_drains)
    safety["maxConcurrentDrains"] = *s.safety.max_concurrent_drains;
  if (s.safety.max_devices_per_hour) safety["maxDevicesPerHour"] = *s.safety.max_devices_per_hour;
  j["safety"] = safety;
  j["dryRun"] = s.dry_run;
  j["paused"] = s.paused;
  return j;
}

json EncodeStatus(const GpuHealthPolicyStatus& st) {
  json j;
  j["observedGeneration"] = st.observed_generation;
  json conds = json::array();
  for (const auto& c : st.conditions) {
    conds.push_back({{"type", c.type},
                     {"status", c.status},
                     {"reason", c.reason},
                     {"message", c.message},
                     {"lastTransitionTime", FormatRfc3339(c.last_transition_time)},
                     {"observedGeneration", c.observed_generation}});
  }
  j["conditions"] = conds;
  j["matchedNodes"] = st.matched_nodes;
  j["healthyNodes"] = st.healthy_nodes;
  j["unhealthyNodes"] = st.unhealthy_nodes;
  j["unknownNodes"] = st.unknown_nodes;
  j["remediatingNodes"] = st.remediating_nodes;
  if (st.last_brake_time) j["lastBrakeTime"] = FormatRfc3339(*st.last_brake_time);
  return j;
}

}  // namespace

StatusOr<GpuHealthPolicySpec> DecodeGpuHealthPolicySpec(std::string_view spec_json) {
  simdjson::dom::parser parser;
  GG_ASSIGN_OR_RETURN(element root, ParseRoot(parser, spec_json));
  GpuHealthPolicySpec spec;
  GG_RETURN_IF_ERROR(DecodeSpecObject(root, "spec", &spec));
  return spec;
}

StatusOr<GpuHealthPolicy> DecodeGpuHealthPolicy(std::string_view json_text) {
  simdjson::dom::parser parser;
  GG_ASSIGN_OR_RETURN(element root, ParseRoot(parser, json_text));
  object o;
  GG_RETURN_IF_ERROR(AsObject(root, "(root)", &o));
  GpuHealthPolicy p;
  std::string kind;
  GG_RETURN_IF_ERROR(Field(o, "kind", "", &kind, AsString));
  if (!kind.empty() && kind != kPolicyKind) {
    return InvalidArgumentError("kind: expected GPUHealthPolicy, got \"" + kind + "\"");
  }
  element md;
  if (Find(o, "metadata", &md)) {
    object mo;
    GG_RETURN_IF_ERROR(AsObject(md, "metadata", &mo));
    GG_RETURN_IF_ERROR(Field(mo, "name", "metadata", &p.name, AsString));
    GG_RETURN_IF_ERROR(Field(mo, "uid", "metadata", &p.uid, AsString));
    GG_RETURN_IF_ERROR(Field(mo, "resourceVersion", "metadata", &p.resource_version, AsString));
    GG_RETURN_IF_ERROR(Field(mo, "generation", "metadata", &p.generation, AsInt64));
  }
  element sub;
  if (Find(o, "spec", &sub)) {
    GG_RETURN_IF_ERROR(DecodeSpecObject(sub, "spec", &p.spec));
  } else {
    p.spec = DefaultPolicySpec();
  }
  if (Find(o, "status", &sub)) GG_RETURN_IF_ERROR(DecodeStatusObject(sub, "status", &p.status));
  return p;
}

std::string EncodeGpuHealthPolicy(const GpuHealthPolicy& policy) {
  json j;
  j["apiVersion"] = kApiVersion;
  j["kind"] = kPolicyKind;
  json md = {{"name", policy.name}};
  if (!policy.uid.empty()) md["uid"] = policy.uid;
  if (!policy.resource_version.empty()) md["resourceVersion"] = policy.resource_version;
  if (policy.generation) md["generation"] = policy.generation;
  j["metadata"] = md;
  j["spec"] = EncodeSpec(policy.spec);
  j["status"] = EncodeStatus(policy.status);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string EncodeGpuHealthPolicyStatus(const GpuHealthPolicyStatus& status) {
  return EncodeStatus(status).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gg::api
