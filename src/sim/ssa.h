// Server-side apply and field ownership (metadata.managedFields) the way kube-apiserver's
// structured-merge-diff does it, on the JSON objects the simulator stores:
// * a field set is a set of paths whose elements are FieldsV1 keys: "f:<field>",
//   "k:<list-map keys as JSON>", "v:<set value as JSON>";
// * list and map semantics follow the OpenAPI schema: x-kubernetes-list-type map/set/atomic
//   with x-kubernetes-list-map-keys, else the patch merge key; x-kubernetes-map-type atomic;
//   no schema: objects are granular, lists atomic;
// * apply merges the configuration into the live object, refuses (409) a change to a field
//   another manager owns unless forced (then takes it), removes fields the manager applied
//   before and no longer applies when nobody else owns them, and records an Apply entry;
// * any other write records the fields it changed for its manager (an Update entry) and takes
//   them from the others.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/api_error.h"

namespace gg::sim {

class SchemaSet;

using FieldPath = std::vector<std::string>;
using FieldSet = std::set<FieldPath>;

// Where a type's schema comes from: the schema set (for $ref, ObjectMeta) and the object's
// root schema (nullptr: untyped).
struct SsaType {
  const SchemaSet* set = nullptr;
  const nlohmann::json* root = nullptr;
  bool status_subresource = false;  // main resource writes do not own status, /status only status
};

// Every field `obj` sets, as owned by whoever wrote it (server-managed metadata left out).
FieldSet FieldsOf(const nlohmann::json& obj, const SsaType& type, bool status_request);
nlohmann::json EncodeFieldsV1(const FieldSet& s);
FieldSet DecodeFieldsV1(const nlohmann::json& fields);
// ".spec.containers[name=\"a\"].image" — the path as the apiserver prints it in conflicts.
std::string FieldPathString(const FieldPath& p);

struct ManagerInfo {
  std::string manager;
  std::string api_version;
  std::string subresource;  // "" or "status"
  std::string now;          // RFC 3339 time for changed entries
};

struct ApplyOutcome {
  nlohmann::json object;  // live merged with the configuration, managedFields set
  std::optional<ApiError> err;
};

// Server-side apply of `config` onto `live` (null when the object does not exist yet).
ApplyOutcome ServerSideApply(const nlohmann::json& live, const nlohmann::json& config,
                             const SsaType& type, const ManagerInfo& who, bool force,
                             std::string_view kind, std::string_view group);

// metadata.managedFields of `next` after a non-apply write by `who` that turned `old` (null
// for a create) into `next`. managedFields given in `next` by the client win as they are.
nlohmann::json UpdateManagedFields(const nlohmann::json& old, const nlohmann::json& next,
                                   const SsaType& type, const ManagerInfo& who);

}  // namespace gg::sim
