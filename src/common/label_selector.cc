// LabelSelector matching, query form and validation.
#include "common/label_selector.h"

#include <algorithm>

namespace gg {

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  return MatchesLookup([&](std::string_view key) -> std::optional<std::string_view> {
    auto it = labels.find(std::string(key));
    if (it == labels.end()) return std::nullopt;
    return it->second;
  });
}

bool LabelSelector::MatchesLookup(
    const std::function<std::optional<std::string_view>(std::string_view key)>& get) const {
  for (const auto& [k, v] : match_labels) {
    auto got = get(k);
    if (!got || *got != v) return false;
  }
  for (const auto& req : match_expressions) {
    auto got = get(req.key);
    bool has = got.has_value();
    bool in = has && std::find(req.values.begin(), req.values.end(), *got) != req.values.end();
    if (req.op == "In" && !in) return false;
    if (req.op == "NotIn" && in) return false;
    if (req.op == "Exists" && !has) return false;
    if (req.op == "DoesNotExist" && has) return false;
    if (req.op != "In" && req.op != "NotIn" && req.op != "Exists" && req.op != "DoesNotExist") {
      return false;  // an invalid operator never matches (validation reports it)
    }
  }
  return true;
}

std::string LabelSelector::ToQuery() const {
  std::string out;
  auto sep = [&] {
    if (!out.empty()) out += ',';
  };
  for (const auto& [k, v] : match_labels) {
    sep();
    out += k + "=" + v;
  }
  for (const auto& req : match_expressions) {
    sep();
    if (req.op == "Exists") {
      out += req.key;
    } else if (req.op == "DoesNotExist") {
      out += "!" + req.key;
    } else {
      std::vector<std::string> vals = req.values;
      std::sort(vals.begin(), vals.end());
      out += req.key + (req.op == "In" ? " in (" : " notin (");
      for (std::size_t i = 0; i < vals.size(); ++i) {
        if (i) out += ',';
        out += vals[i];
      }
      out += ')';
    }
  }
  return out;
}

Status LabelSelector::Validate() const {
  for (const auto& req : match_expressions) {
    if (req.key.empty()) return InvalidArgumentError("matchExpressions: empty key");
    if (req.op == "In" || req.op == "NotIn") {
      if (req.values.empty()) {
        return InvalidArgumentError("matchExpressions[" + req.key + "]: " + req.op +
                                    " needs values");
      }
    } else if (req.op == "Exists" || req.op == "DoesNotExist") {
      if (!req.values.empty()) {
        return InvalidArgumentError("matchExpressions[" + req.key + "]: " + req.op +
                                    " takes no values");
      }
    } else {
      return InvalidArgumentError("matchExpressions[" + req.key + "]: unknown operator \"" +
                                  req.op + "\"");
    }
  }
  return OkStatus();
}

}  // namespace gg
