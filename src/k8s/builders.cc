// Request bodies built with nlohmann::json.
#include "k8s/builders.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/time_util.h"

namespace gg::k8s {
namespace {

using nlohmann::json;

json TaintJson(const Taint& t) {
  json j = {{"key", t.key}, {"effect", t.effect}};
  if (!t.value.empty()) j["value"] = t.value;
  if (t.time_added) j["timeAdded"] = FormatRfc3339(*t.time_added);
  return j;
}

void AddResourceVersion(json& j, std::string_view rv) {
  if (!rv.empty()) j["metadata"]["resourceVersion"] = std::string(rv);
}

json MapPatch(const std::map<std::string, std::optional<std::string>>& changes) {
  json m = json::object();
  for (const auto& [k, v] : changes) {
    if (v) {
      m[k] = *v;
    } else {
      m[k] = nullptr;
    }
  }
  return m;
}

}  // namespace

std::string JsonQuote(std::string_view s) { return json(std::string(s)).dump(); }

std::string TaintsPatch(const std::vector<Taint>& taints, std::string_view resource_version) {
  json j;
  AddResourceVersion(j, resource_version);
  if (taints.empty()) {
    j["spec"]["taints"] = nullptr;
  } else {
    json arr = json::array();
    for (const auto& t : taints) arr.push_back(TaintJson(t));
    j["spec"]["taints"] = std::move(arr);
  }
  return j.dump();
}

std::string UnschedulablePatch(bool unschedulable, std::string_view resource_version) {
  json j;
  AddResourceVersion(j, resource_version);
  if (unschedulable) {
    j["spec"]["unschedulable"] = true;
  } else {
    j["spec"]["unschedulable"] = nullptr;
  }
  return j.dump();
}

std::string NodeConditionPatch(const NodeCondition& c) {
  json cond = {{"type", c.type}, {"status", c.status}};
  if (!c.reason.empty()) cond["reason"] = c.reason;
  if (!c.message.empty()) cond["message"] = c.message;
  if (c.last_transition_time) cond["lastTransitionTime"] = FormatRfc3339(*c.last_transition_time);
  if (c.last_heartbeat_time) cond["lastHeartbeatTime"] = FormatRfc3339(*c.last_heartbeat_time);
  json j;
  j["status"]["conditions"] = json::array({cond});
  return j.dump();
}

std::string AnnotationsPatch(const std::map<std::string, std::optional<std::string>>& changes,
                             std::string_view resource_version) {
  json j;
  AddResourceVersion(j, resource_version);
  j["metadata"]["annotations"] = MapPatch(changes);
  return j.dump();
}

std::string LabelsPatch(const std::map<std::string, std::optional<std::string>>& changes) {
  json j;
  j["metadata"]["labels"] = MapPatch(changes);
  return j.dump();
}

std::string EventBody(const EventSpec& e) {
  std::string ns = e.namespace_;
  if (ns.empty())
    ns = e.involved_object.namespace_.empty() ? "default" : e.involved_object.namespace_;
  std::string name = e.name;
  if (name.empty()) {
    auto nanos =
        std::chrono::duration_cast<std::chrono::nanoseconds>(e.first_timestamp.time_since_epoch())
            .count();
    char hex[32];
    std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(nanos));
    name = e.involved_object.name + "." + hex;
  }
  json inv = json::object();
  if (!e.involved_object.api_version.empty()) inv["apiVersion"] = e.involved_object.api_version;
  if (!e.involved_object.kind.empty()) inv["kind"] = e.involved_object.kind;
  if (!e.involved_object.namespace_.empty()) inv["namespace"] = e.involved_object.namespace_;
  inv["name"] = e.involved_object.name;
  if (!e.involved_object.uid.empty()) inv["uid"] = e.involved_object.uid;
  json j = {{"apiVersion", "v1"},
            {"kind", "Event"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"involvedObject", inv},
            {"reason", e.reason},
            {"message", e.message},
            {"type", e.type.empty() ? "Normal" : e.type},
            {"count", e.count},
            {"firstTimestamp", FormatRfc3339(e.first_timestamp)},
            {"lastTimestamp", FormatRfc3339(e.last_timestamp)}};
  json source = json::object();
  if (!e.reporting_component.empty()) {
    source["component"] = e.reporting_component;
    j["reportingComponent"] = e.reporting_component;
  }
  if (!e.reporting_instance.empty()) {
    source["host"] = e.reporting_instance;
    j["reportingInstance"] = e.reporting_instance;
  }
  j["source"] = source;
  if (!e.action.empty()) j["action"] = e.action;
  return j.dump();
}

std::string EventRepeatPatch(std::int32_t count, WallTime last_timestamp,
                             std::string_view message) {
  json j = {{"count", count},
            {"lastTimestamp", FormatRfc3339(last_timestamp)},
            {"message", std::string(message)}};
  return j.dump();
}

namespace {
json DeleteOptionsJson(const DeleteOptions& o) {
  json j = json::object();
  if (o.grace_period_seconds) j["gracePeriodSeconds"] = *o.grace_period_seconds;
  if (!o.propagation_policy.empty()) j["propagationPolicy"] = o.propagation_policy;
  if (!o.precondition_uid.empty()) j["preconditions"]["uid"] = o.precondition_uid;
  if (!o.precondition_resource_version.empty()) {
    j["preconditions"]["resourceVersion"] = o.precondition_resource_version;
  }
  return j;
}
}  // namespace

std::string DeleteOptionsBody(const DeleteOptions& o) {
  json j = DeleteOptionsJson(o);
  if (j.empty()) return "";
  j["apiVersion"] = "v1";
  j["kind"] = "DeleteOptions";
  return j.dump();
}

std::string EvictionBody(std::string_view ns, std::string_view name, const DeleteOptions& o) {
  json j = {{"apiVersion", "policy/v1"},
            {"kind", "Eviction"},
            {"metadata", {{"name", std::string(name)}, {"namespace", std::string(ns)}}},
            {"deleteOptions", DeleteOptionsJson(o)}};
  return j.dump();
}

std::string LeaseBody(const Lease& l) {
  json meta = {{"name", l.meta.name}, {"namespace", l.meta.namespace_}};
  if (!l.meta.resource_version.empty()) meta["resourceVersion"] = l.meta.resource_version;
  json spec = {{"holderIdentity", l.holder_identity}, {"leaseTransitions", l.lease_transitions}};
  if (l.lease_duration_seconds) spec["leaseDurationSeconds"] = *l.lease_duration_seconds;
  if (l.acquire_time) spec["acquireTime"] = FormatRfc3339Micro(*l.acquire_time);
  if (l.renew_time) spec["renewTime"] = FormatRfc3339Micro(*l.renew_time);
  json j = {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", meta},
            {"spec", spec}};
  return j.dump();
}

}  // namespace gg::k8s
