// Label and field selectors as the API server parses and applies them (apimachinery
// labels.Parse / fields.ParseSelector, docs/reference/kubernetes-api.md): matched against the
// labels and indexed fields kept per object (FieldMap) or against JSON objects; plus the
// object-name / label / annotation syntax checks every write goes through. Pure.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "sim/api_error.h"  // StatusCause

namespace gg::sim {

// Sorted (key, value) pairs.
using FieldMap = std::vector<std::pair<std::string, std::string>>;

const std::string* FindField(const FieldMap& m, std::string_view key);

// metadata.labels (object or null) -> sorted FieldMap.
FieldMap LabelsOf(const nlohmann::json& obj);

// ---- label selectors ---------------------------------------------------------------

class LabelSelector {
 public:
  enum class Op { kExists, kNotExists, kIn, kNotIn, kGt, kLt };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;  // "k=v" is kIn {v}; "k!=v" is kNotIn {v}
  };

  // "" matches everything. Grammar: comma-separated AND of `k`, `!k`, `k=v`, `k==v`,
  // `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>N`, `k<N`. Errors are InvalidArgument worded
  // like labels.Parse, e.g. "unable to parse requirement: found '(', expected: identifier"
  // or "unable to parse requirement: values[0][a]: Invalid value: \"b c\": a valid label
  // must be an empty string or consist of ...".
  static StatusOr<LabelSelector> Parse(std::string_view s);
  // metav1.LabelSelector JSON {matchLabels, matchExpressions}; null selects nothing,
  // {} selects everything.
  static StatusOr<LabelSelector> FromJson(const nlohmann::json& sel);

  bool Matches(const FieldMap& labels) const;
  // `labels` = metadata.labels JSON (object; null/absent = no labels).
  bool MatchesJson(const nlohmann::json& labels) const;
  // Generic: `get(key)` returns the label value or nullptr.
  bool Matches(const std::function<const std::string*(std::string_view)>& get) const;

  bool Empty() const { return !nothing_ && reqs_.empty(); }
  bool SelectsNothing() const { return nothing_; }
  const std::vector<Requirement>& requirements() const { return reqs_; }
  void Add(Requirement r) { reqs_.push_back(std::move(r)); }
  std::string ToString() const;

 private:
  std::vector<Requirement> reqs_;
  bool nothing_ = false;
};

// ---- field selectors ---------------------------------------------------------------

class FieldSelector {
 public:
  // "a=b,c!=d,e==f"; values escape '\', ',' and '=' with a backslash. Error:
  // InvalidArgument "invalid selector: '<s>'; can't understand '<term>'".
  static StatusOr<FieldSelector> Parse(std::string_view s);

  bool Matches(const FieldMap& fields) const;
  // Matches JSON `obj` of `resource` in `group` through FieldValue().
  bool MatchesObject(std::string_view group, std::string_view resource,
                     const nlohmann::json& obj) const;
  bool Empty() const { return terms_.empty(); }
  // Field names used (to check them against the supported set).
  std::vector<std::string> Fields() const;
  // The value of an equality term on `field`, if any (index lookups).
  const std::string* EqualityValue(std::string_view field) const;

  // Checks every field is supported for `resource` (SupportedFields + `extra_fields`, e.g.
  // CRD selectableFields). Error: InvalidArgument "field label not supported: <field>"
  // (the server answers 400 BadRequest).
  Status ValidateFor(std::string_view group, std::string_view resource, bool namespaced,
                     const std::vector<std::string>& extra_fields = {}) const;

 private:
  struct Term {
    std::string field, value;
    bool negate;
  };
  std::vector<Term> terms_;
};

// The fields the real server supports for field selectors (§4.3). Every resource:
// metadata.name (+ metadata.namespace when namespaced). nodes: spec.unschedulable.
// pods: spec.nodeName, spec.restartPolicy, spec.schedulerName, spec.serviceAccountName,
// spec.hostNetwork, status.phase, status.podIP, status.nominatedNodeName. core events:
// involvedObject.{kind,namespace,name,uid,apiVersion,resourceVersion,fieldPath}, reason,
// reportingComponent, source, type. events.k8s.io events: the same core names (the real
// server converts them; best effort). namespaces: status.phase.
std::vector<std::string> SupportedFields(std::string_view group, std::string_view resource,
                                         bool namespaced);

// The selector-visible value of `field` in `obj`: booleans "true"/"false"
// (spec.unschedulable and spec.hostNetwork absent = "false"), absent strings "", core
// event "source" = source.component; events.k8s.io objects are read through their v1 names
// (involvedObject.* = regarding.*, source = deprecatedSource.component,
// reportingComponent = reportingController). Unknown fields: the dotted path's scalar or "".
std::string FieldValue(std::string_view group, std::string_view resource, const nlohmann::json& obj,
                       std::string_view field);

// All supported fields of `obj` with their values (sorted): the store's per-object index.
FieldMap IndexFields(std::string_view group, std::string_view resource, bool namespaced,
                     const nlohmann::json& obj);

// ---- name / label / annotation syntax (apimachinery util/validation) ---------------

// Each returns the problems (empty = valid), worded like apimachinery.
std::vector<std::string> IsDns1123Subdomain(std::string_view s);
std::vector<std::string> IsDns1123Label(std::string_view s);
std::vector<std::string> IsQualifiedName(std::string_view s);  // label/annotation keys
std::vector<std::string> IsValidLabelValue(std::string_view s);

inline constexpr size_t kTotalAnnotationSizeLimitBytes = 256 * 1024;

enum class NameRule { kDns1123Subdomain, kDns1123Label, kNone };

// name/generateName (name required unless generateName), namespace presence per scope and
// syntax, label keys/values, annotation keys and total size (256 KiB), ownerReferences
// required fields. Causes are like the real server's field errors: reason
// "FieldValueInvalid" / "FieldValueRequired" / "FieldValueForbidden" / "FieldValueTooLong",
// field "metadata.name", message "Invalid value: \"Foo\": a lowercase RFC 1123 ...".
std::vector<StatusCause> ValidateObjectMeta(const nlohmann::json& metadata, bool namespaced,
                                            NameRule rule = NameRule::kDns1123Subdomain);

// Field-error helpers (messages as field.Error.ErrorBody()).
StatusCause InvalidCause(std::string field, const nlohmann::json& value, std::string detail);
StatusCause RequiredCause(std::string field, std::string detail = "");
StatusCause NotSupportedCause(std::string field, const nlohmann::json& value,
                              const std::vector<std::string>& supported);
StatusCause ForbiddenCause(std::string field, std::string detail);
StatusCause TooLongCause(std::string field, size_t max_bytes);
StatusCause DuplicateCause(std::string field, const nlohmann::json& value);
// Go %v-like rendering of a value inside "Invalid value: ..." ("\"s\"", 3, true, null).
std::string RenderValue(const nlohmann::json& v);

}  // namespace gg::sim
