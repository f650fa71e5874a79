// Patch application for the simulator: RFC 7386 merge patch, RFC 6902 JSON patch and
// Kubernetes strategic merge patch (SMP) with the real merge keys of the built-in kinds we
// serve (docs/reference/kubernetes-api.md, "Writes"). Pure functions on generic JSON; errors are
// InvalidArgument with messages shaped like the real server's.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace gg::sim {

// RFC 7386. The top-level patch must be a JSON object (the API server rejects anything
// else for PATCH bodies); nested non-object values replace, null deletes, arrays replace.
StatusOr<nlohmann::json> ApplyMergePatch(const nlohmann::json& obj, const nlohmann::json& patch);

// RFC 6902: add, remove, replace, move, copy, test on JSON Pointers ("~1" = "/", "~0" = "~").
// `patch` must be an array of operation objects. A failed `test` or a missing path is an
// InvalidArgument (the server maps both to 422 Invalid / 400 respectively; see
// IsJsonPatchTestFailure).
StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& obj, const nlohmann::json& patch);

// True when `s` came from ApplyJsonPatch's `test` op failing (server answers 422).
bool IsJsonPatchTestFailure(const Status& s);

// Strategic merge patch for built-in kind `kind` ("Node", "Pod", "Deployment", ...).
// Honors patch-merge-keys (conditions by `type`, containers by `name`, ownerReferences by
// `uid`, ...), atomic lists (node spec.taints, pod spec.tolerations, every list without a
// merge key), merge-strategy primitive lists (metadata.finalizers), and the directives
// `$patch: replace|delete|merge`, `$retainKeys`, `$deleteFromPrimitiveList/<f>`,
// `$setElementOrder/<f>`. Kinds without a table (e.g. custom resources) get maps merged and
// every list replaced; the server should answer 415 for CRs before calling this
// (see SupportsStrategicMerge).
StatusOr<nlohmann::json> ApplyStrategicMergePatch(const nlohmann::json& obj,
                                                  const nlohmann::json& patch,
                                                  std::string_view kind);

// True for the built-in kinds that accept application/strategic-merge-patch+json.
bool SupportsStrategicMerge(std::string_view kind);

// How SMP treats the list at `path` (dotted, list elements as "[]", e.g.
// "spec.template.spec.containers[].env") inside an object of `kind`.
struct ListStrategy {
  enum class Kind { kAtomic, kMergeByKey, kMergePrimitive } kind = Kind::kAtomic;
  std::string merge_key;     // for kMergeByKey
  bool retain_keys = false;  // patchStrategy "merge,retainKeys" (pod spec.volumes)
};
ListStrategy ListStrategyFor(std::string_view kind, std::string_view path);

}  // namespace gg::sim
