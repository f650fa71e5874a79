// OpenAPI v3 (Kubernetes structural subset) validation for the simulator: CRD schemas and
// the real built-in documents, plus the Go-side validation rules of built-in kinds that the
// real server applies instead of OpenAPI (names, labels, taint effects, Event fields, ...).
// Pure; results are StatusCause lists a 422 Status is built from.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/selector.h"

namespace gg::sim {

struct SchemaValidation {
  std::vector<StatusCause> causes;  // empty = valid
  // CEL rules (x-kubernetes-validations) are not checked here: ValidateCelRules below.
  bool ok() const { return causes.empty(); }
};

// A set of named schemas ("#/components/schemas/<name>") from one or more OpenAPI v3
// documents (or CRD versions), with $ref/allOf resolution.
class SchemaSet {
 public:
  // Adds every components.schemas entry of an OpenAPI v3 document.
  Status AddDocument(const nlohmann::json& openapi_doc);
  // Reads and adds an OpenAPI v3 JSON file.
  Status AddDocumentFile(const std::string& path);
  // Adds (or replaces) one named schema.
  void AddSchema(const std::string& name, nlohmann::json schema);

  const nlohmann::json* Find(std::string_view name) const;
  // Schema name for a GVK via x-kubernetes-group-version-kind (group "" = core).
  std::optional<std::string> NameForGvk(std::string_view group, std::string_view version,
                                        std::string_view kind) const;
  size_t size() const { return schemas_.size(); }

  // Validates `value` against `schema` (which may $ref into this set). `root` prefixes field
  // paths (e.g. "" gives "spec.taints[0].effect"). Checks: type (incl. nullable,
  // int-or-string, int32/int64 format), properties/required, items, additionalProperties,
  // enum, minimum/maximum (+exclusive), minLength/maxLength, pattern (ECMAScript),
  // minItems/maxItems, minProperties/maxProperties, x-kubernetes-list-type set/map
  // uniqueness, preserve-unknown-fields and embedded-resource (apiVersion/kind required).
  SchemaValidation Validate(const nlohmann::json& value, const nlohmann::json& schema,
                            std::string_view root = "") const;
  SchemaValidation ValidateNamed(const nlohmann::json& value, std::string_view name) const;

  // Fields present in `value` but not declared by `schema` (no additionalProperties, no
  // x-kubernetes-preserve-unknown-fields on the way): paths such as "spec.foo" — the
  // fieldValidation=Strict list. Built-in object metadata is walked too.
  std::vector<std::string> UnknownFields(const nlohmann::json& value,
                                         const nlohmann::json& schema) const;

  // Resolves a {"$ref": "#/components/schemas/X"} (or a single-element allOf of one) to the
  // referenced schema; returns `schema` itself otherwise; nullptr on a dangling ref.
  const nlohmann::json* Resolve(const nlohmann::json& schema) const;

 private:
  std::map<std::string, nlohmann::json, std::less<>> schemas_;
};

// Loads every *.json OpenAPI document in `dir` (e.g. src/sim/data/openapi/release-1.35),
// plus the hand-written DeviceTaintRule schema for `kube_version` ("1.33".."1.36").
StatusOr<SchemaSet> LoadBuiltinSchemas(const std::string& dir, std::string_view kube_version);

// Directory of the shipped OpenAPI documents for a kube version ("1.32".."1.36"):
// "<data_root>/openapi/release-1.35" etc. (1.33/1.34 map to the 1.35 set; 1.32 to 1.32).
std::string OpenApiDirFor(const std::string& data_root, std::string_view kube_version);
// The source tree's data root (src/sim/data), compiled in.
std::string DefaultDataRoot();

// DeviceTaintRule is absent from the saved documents; written from
// docs/reference/dra.md. Component name "io.k8s.api.resource.<ver>.DeviceTaintRule"
// with ver v1alpha3 (1.33-1.35) or v1beta2 (1.36); 1.35+ adds status and effect None.
nlohmann::json DeviceTaintRuleSchema(std::string_view kube_version);
std::string DeviceTaintRuleVersion(std::string_view kube_version);

// Go-validation rules of built-in kinds that the real server enforces and we emulate:
// * every kind: ValidateObjectMeta (name syntax per kind, labels, annotations ≤ 256 KiB);
// * Node: spec.taints[i]: key required + qualified name, value label value, effect
//   required ∈ {NoSchedule, PreferNoSchedule, NoExecute}, no duplicate key+effect;
// * Pod: spec.containers required non-empty, container name DNS label + unique + image
//   required (create), tolerations operator/effect enums;
// * core/v1 Event and events.k8s.io/v1 Event: the rules in docs/reference/kubernetes-api.md
// ("Events");
// * PodDisruptionBudget: minAvailable/maxUnavailable mutually exclusive, non-negative,
//   percent ≤ 100%;
// * Lease: leaseDurationSeconds > 0 when set; leaseTransitions ≥ 0;
// * DeviceTaintRule / ResourceSlice device taints: effect enum per version, key required.
// `group` "" is core. `kind` is the Kind. `is_create` selects create-only rules.
std::vector<StatusCause> ValidateBuiltin(const nlohmann::json& obj, std::string_view group,
                                         std::string_view version, std::string_view kind,
                                         bool namespaced, bool is_create = true,
                                         std::string_view kube_version = "1.35");

// ---- Structural schemas (CRDs): pruning, defaulting, CEL rules ---------------------------
// What apiextensions-apiserver does to a custom resource between decoding and storing it.

// Drops fields the schema does not declare (unless x-kubernetes-preserve-unknown-fields or
// additionalProperties allow them) and nulls of non-nullable fields without a default.
// `root`: the object is a resource (apiVersion, kind and metadata are kept); embedded
// resources (x-kubernetes-embedded-resource) keep theirs too.
void PruneUnknownFields(nlohmann::json& value, const nlohmann::json& schema, bool root = true);

// Structural defaulting: a property that is absent (or null while not nullable) gets its
// `default`, then defaulting recurses into every property, list item and map value, so
// defaults nested inside defaults, arrays and maps are applied as the real defaulter does.
void ApplyStructuralDefaults(nlohmann::json& value, const nlohmann::json& schema);

// Evaluates every x-kubernetes-validations rule of `schema` against `obj` (`old`: the
// object before an update, nullptr on create; transition rules, those that reference
// oldSelf, run only where an old value correlates: object properties, map values and items of
// list-type map/set lists). Causes as the real server words them:
// `spec.rules[0]: Invalid value: "object": <message>`.
std::vector<StatusCause> ValidateCelRules(const nlohmann::json& obj, const nlohmann::json* old,
                                          const nlohmann::json& schema);

// CRD creation/update checks of its CEL rules: every rule and messageExpression compiles
// against its schema, and each rule's estimated cost (times how often it can run: the
// maxItems/maxProperties of the lists and maps above it) is within the per-rule limit
// (10,000,000) and all rules together within the per-CRD limit (100,000,000). Causes are
// reported on spec.validation.openAPIV3Schema... (one schema shared by every version) or
// spec.versions[i].schema.openAPIV3Schema....
std::vector<StatusCause> ValidateCrdValidationRules(const nlohmann::json& crd);
constexpr std::uint64_t kCelPerRuleCostLimit = 10'000'000;
constexpr std::uint64_t kCelPerCrdCostLimit = 100'000'000;

// The 422 body: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
// "message":"<Kind> \"<name>\" is invalid: <c1>" (or ": [c1, c2]"),"reason":"Invalid",
// "details":{"name":..,"group":..,"kind":"<Kind>","causes":[...]},"code":422}.
// `group` omitted from details when empty.
nlohmann::json InvalidStatus(std::string_view kind, std::string_view group, std::string_view name,
                             const std::vector<StatusCause>& causes);

// Strict field validation error text, as the server words it for
// fieldValidation=Strict: "strict decoding error: unknown field \"spec.foo\", ..."
std::string StrictDecodingMessage(const std::vector<std::string>& unknown_fields);

}  // namespace gg::sim
