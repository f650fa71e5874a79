// LabelSelector: metav1.LabelSelector, the one definition shared by the API types (policy
// nodeSelector), the Kubernetes client (PDB and drain-stage selectors) and the operator.
// (The simulator keeps its own on purpose: it stands in for the API server and must not share
// the client's code.) An empty selector matches everything; callers keep
// std::optional<LabelSelector> where "absent selects nothing" matters.
#pragma once

#include <concepts>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gg {

struct LabelSelectorRequirement {
  std::string key;
  std::string op;  // In | NotIn | Exists | DoesNotExist
  std::vector<std::string> values;
  friend bool operator==(const LabelSelectorRequirement&,
                         const LabelSelectorRequirement&) = default;
};

struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;

  // Over any label store: `get(key)` is the label's value or nullopt. An unknown operator
  // never matches (Validate reports it).
  bool MatchesLookup(
      const std::function<std::optional<std::string_view>(std::string_view key)>& get) const;
  bool Matches(const std::map<std::string, std::string>& labels) const;
  // Any store with `Get(key) -> optional<string_view>` (k8s::LabelMap), without a copy.
  template <typename Labels>
  requires requires(const Labels& l, std::string_view k) {
    { l.Get(k) } -> std::convertible_to<std::optional<std::string_view>>;
  }
  bool Matches(const Labels& labels) const {
    return MatchesLookup([&labels](std::string_view key) { return labels.Get(key); });
  }
  bool Empty() const { return match_labels.empty() && match_expressions.empty(); }
  // The `labelSelector=` query form ("a=b,c in (x,y),!d").
  std::string ToQuery() const;
  // InvalidArgument for an empty key, unknown operators, missing values on In/NotIn or values
  // on Exists/DoesNotExist.
  Status Validate() const;
  friend bool operator==(const LabelSelector&, const LabelSelector&) = default;
};

}  // namespace gg
