// Request bodies built with nlohmann::json (writes are rare; reads use simdjson): patches for
// taints, conditions, unschedulable and annotations, Event, Eviction, Lease, DeleteOptions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::k8s {

// {"metadata":{"resourceVersion":rv}?,"spec":{"taints":[...]|null}} — the whole taint list
// (taints are an atomic list for SMP and merge patch alike). Empty rv: no precondition.
std::string TaintsPatch(const std::vector<Taint>& taints, std::string_view resource_version = "");
// {"spec":{"unschedulable":true|null}}
std::string UnschedulablePatch(bool unschedulable, std::string_view resource_version = "");
// Strategic-merge patch for nodes/<n>/status: {"status":{"conditions":[cond]}} (merge key type).
std::string NodeConditionPatch(const NodeCondition& condition);
// Merge patch of metadata.annotations; nullopt values delete.
std::string AnnotationsPatch(const std::map<std::string, std::optional<std::string>>& changes,
                             std::string_view resource_version = "");
// Merge patch of metadata.labels; nullopt values delete.
std::string LabelsPatch(const std::map<std::string, std::optional<std::string>>& changes);

// core/v1 Event as client-go's recorder writes it (namespace "default" for cluster objects).
struct EventSpec {
  std::string name;        // "<involved>.<hex nanos>"; empty → generated from `now`
  std::string namespace_;  // empty → involved namespace or "default"
  ObjectReference involved_object;
  std::string type;  // Normal | Warning
  std::string reason;
  std::string message;
  std::string action;
  std::string reporting_component;  // also source.component
  std::string reporting_instance;   // also source.host
  std::int32_t count = 1;
  WallTime first_timestamp{};
  WallTime last_timestamp{};
};
std::string EventBody(const EventSpec& e);
// SMP for a repeat: {"count":n,"lastTimestamp":t,"message":m}
std::string EventRepeatPatch(std::int32_t count, WallTime last_timestamp, std::string_view message);

// {"apiVersion":"policy/v1","kind":"Eviction","metadata":{...},"deleteOptions":{...}}
std::string EvictionBody(std::string_view ns, std::string_view name, const DeleteOptions& o);
// {"apiVersion":"v1","kind":"DeleteOptions",...}; "" when there is nothing to say.
std::string DeleteOptionsBody(const DeleteOptions& o);

// Full coordination.k8s.io/v1 Lease (for create and PUT; carries meta.resource_version).
// Times are written as MicroTime.
std::string LeaseBody(const Lease& lease);

// JSON string literal with escapes ("\"a\\\"b\"").
std::string JsonQuote(std::string_view s);

}  // namespace gg::k8s
