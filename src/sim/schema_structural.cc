// Structural-schema behaviour of custom resources: pruning, defaulting, CEL validation rules
// (runtime) and the CRD-time checks of those rules (compilation, cost). See schema.h.
#include <algorithm>
#include <memory>
#include <mutex>
#include <sstream>

#include "sim/api_util.h"
#include "sim/cel/cel.h"
#include "sim/schema.h"

namespace gg::sim {

using nlohmann::json;

namespace {

const json* Prop(const json& schema, const std::string& key) {
  if (!schema.is_object()) return nullptr;
  auto p = schema.find("properties");
  if (p == schema.end() || !p->is_object()) return nullptr;
  auto it = p->find(key);
  return it == p->end() ? nullptr : &*it;
}

const json* AdditionalProps(const json& schema) {
  if (!schema.is_object()) return nullptr;
  auto a = schema.find("additionalProperties");
  return a != schema.end() && a->is_object() ? &*a : nullptr;
}

const json* Items(const json& schema) {
  if (!schema.is_object()) return nullptr;
  auto a = schema.find("items");
  return a != schema.end() && a->is_object() ? &*a : nullptr;
}

bool Flag(const json& schema, const char* key) {
  return schema.is_object() && schema.value(key, false);
}

bool PreservesUnknown(const json& schema) {
  if (Flag(schema, "x-kubernetes-preserve-unknown-fields")) return true;
  if (!schema.is_object()) return false;
  auto a = schema.find("additionalProperties");
  return a != schema.end() && a->is_boolean() && a->get<bool>();
}

}  // namespace

void PruneUnknownFields(json& v, const json& schema, bool root) {
  if (!schema.is_object()) return;
  if (v.is_object()) {
    const bool embedded = root || Flag(schema, "x-kubernetes-embedded-resource");
    const json* add = AdditionalProps(schema);
    const bool keep_unknown = PreservesUnknown(schema);
    for (auto it = v.begin(); it != v.end();) {
      const std::string& k = it.key();
      const json* ps = Prop(schema, k);
      if (!ps && add) ps = add;
      if (embedded && (k == "apiVersion" || k == "kind" || k == "metadata") && !Prop(schema, k)) {
        ++it;
        continue;
      }
      if (!ps) {
        if (keep_unknown) {
          ++it;
          continue;
        }
        it = v.erase(it);
        continue;
      }
      if (it->is_null() && !Flag(*ps, "nullable") && !ps->contains("default")) {
        it = v.erase(it);
        continue;
      }
      // Properties of the root's metadata are ObjectMeta's business, not the schema's.
      if (!(root && k == "metadata")) PruneUnknownFields(*it, *ps, false);
      ++it;
    }
  } else if (v.is_array()) {
    if (const json* items = Items(schema))
      for (auto& e : v) PruneUnknownFields(e, *items, false);
  }
}

void ApplyStructuralDefaults(json& v, const json& schema) {
  if (!schema.is_object()) return;
  if (v.is_object()) {
    if (auto p = schema.find("properties"); p != schema.end() && p->is_object()) {
      for (auto it = p->begin(); it != p->end(); ++it) {
        auto d = it->find("default");
        if (d == it->end()) continue;
        auto cur = v.find(it.key());
        if (cur == v.end() || (cur->is_null() && !Flag(*it, "nullable"))) v[it.key()] = *d;
      }
    }
    const json* add = AdditionalProps(schema);
    for (auto it = v.begin(); it != v.end(); ++it) {
      const json* ps = Prop(schema, it.key());
      if (!ps) ps = add;
      if (ps) ApplyStructuralDefaults(*it, *ps);
    }
  } else if (v.is_array()) {
    if (const json* items = Items(schema)) {
      for (auto& e : v) {
        if (e.is_null() && items->contains("default") && !Flag(*items, "nullable"))
          e = (*items)["default"];
        ApplyStructuralDefaults(e, *items);
      }
    }
  }
}

// ---- CEL rules on custom resources --------------------------------------------------

namespace {

// Parsed rules are shared by every object of every CRD with the same text.
std::shared_ptr<const cel::Program> CompiledRule(const std::string& text) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const cel::Program>> cache;
  std::scoped_lock lock(mu);
  auto it = cache.find(text);
  if (it != cache.end()) return it->second;
  if (cache.size() > 4096) cache.clear();
  auto p = std::make_shared<const cel::Program>(text);
  cache.emplace(text, p);
  return p;
}

std::string SchemaType(const json& s) {
  std::string t = s.is_object() ? s.value("type", "") : "";
  if (t.empty() && Flag(s, "x-kubernetes-int-or-string")) return "string";
  return t.empty() ? "object" : t;
}

std::string Idx(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}
std::string Child(const std::string& path, const std::string& k) {
  return path.empty() ? k : path + "." + k;
}

// The old element of a list-type map/set list that correlates with `item`.
const json* CorrelatedItem(const json& item, const json& old_list, const json& schema) {
  if (!old_list.is_array()) return nullptr;
  std::string lt = schema.value("x-kubernetes-list-type", "atomic");
  if (lt == "set") {
    for (const auto& o : old_list)
      if (o == item) return &o;
    return nullptr;
  }
  if (lt != "map" || !item.is_object()) return nullptr;
  auto keys = schema.value("x-kubernetes-list-map-keys", json::array());
  for (const auto& o : old_list) {
    if (!o.is_object()) continue;
    bool same = true;
    for (const auto& k : keys) {
      if (!k.is_string()) continue;
      const std::string key = k.get<std::string>();
      if (item.value(key, json()) != o.value(key, json())) {
        same = false;
        break;
      }
    }
    if (same) return &o;
  }
  return nullptr;
}

struct RuleRunner {
  std::vector<StatusCause>& out;

  void Walk(const json& v, const json* old, const json& schema, const std::string& path) {
    if (!schema.is_object() || v.is_null()) return;
    if (auto xv = schema.find("x-kubernetes-validations"); xv != schema.end() && xv->is_array())
      for (const auto& rule : *xv) Run(rule, v, old, schema, path);
    if (v.is_object()) {
      const json* add = AdditionalProps(schema);
      for (auto it = v.begin(); it != v.end(); ++it) {
        const json* ps = Prop(schema, it.key());
        std::string p = ps ? Child(path, it.key()) : path + "[" + it.key() + "]";
        if (!ps) ps = add;
        if (!ps) continue;
        const json* o = nullptr;
        if (old && old->is_object())
          if (auto ot = old->find(it.key()); ot != old->end()) o = &*ot;
        Walk(*it, o, *ps, p);
      }
    } else if (v.is_array()) {
      const json* items = Items(schema);
      if (!items) return;
      for (std::size_t i = 0; i < v.size(); ++i)
        Walk(v[i], old ? CorrelatedItem(v[i], *old, schema) : nullptr, *items, Idx(path, i));
    }
  }

  void Run(const json& rule, const json& v, const json* old, const json& schema,
           const std::string& path) {
    if (!rule.is_object() || !rule.contains("rule") || !rule["rule"].is_string()) return;
    const std::string text = rule["rule"].get<std::string>();
    auto prog = CompiledRule(text);
    if (!prog->ok()) return;  // refused when the CRD was written
    const bool transition = prog->References("oldSelf");
    const bool optional_old = rule.value("optionalOldSelf", false);
    if (transition && !old && !optional_old) return;
    std::map<std::string, json> vars = {{"self", v}};
    if (old)
      vars["oldSelf"] = *old;
    else if (transition)
      vars["oldSelf"] = nullptr;
    cel::Value r = prog->Eval(vars);
    std::string field = path;
    if (rule.contains("fieldPath") && rule["fieldPath"].is_string()) {
      std::string fp = rule["fieldPath"].get<std::string>();
      field = fp.empty() ? path : (path.empty() && fp[0] == '.' ? fp.substr(1) : path + fp);
    }
    const std::string type = SchemaType(schema);
    if (!r.ok()) {
      out.push_back({"FieldValueInvalid", "Invalid value: \"" + type + "\": " + r.error, field});
      return;
    }
    if (r.v == true) return;
    if (!r.v.is_boolean()) {
      out.push_back({"FieldValueInvalid",
                     "Invalid value: \"" + type + "\": rule did not evaluate to a bool", field});
      return;
    }
    std::string msg = rule.value("message", "");
    if (msg.empty()) msg = "failed rule: " + text;
    if (rule.contains("messageExpression") && rule["messageExpression"].is_string()) {
      auto mp = CompiledRule(rule["messageExpression"].get<std::string>());
      if (mp->ok()) {
        cel::Value m = mp->Eval(vars);
        if (m.ok() && m.v.is_string() && !m.v.get<std::string>().empty() &&
            m.v.get<std::string>().find('\n') == std::string::npos)
          msg = m.v.get<std::string>();
      }
    }
    std::string reason = rule.value("reason", "FieldValueInvalid");
    if (reason == "FieldValueForbidden")
      out.push_back({reason, "Forbidden: " + msg, field});
    else if (reason == "FieldValueRequired")
      out.push_back({reason, "Required value: " + msg, field});
    else if (reason == "FieldValueDuplicate")
      out.push_back({reason, "Duplicate value: " + msg, field});
    else
      out.push_back({"FieldValueInvalid", "Invalid value: \"" + type + "\": " + msg, field});
  }
};

}  // namespace

std::vector<StatusCause> ValidateCelRules(const json& obj, const json* old, const json& schema) {
  std::vector<StatusCause> out;
  RuleRunner{out}.Walk(obj, old, schema, "");
  return out;
}

// ---- CRD-time checks --------------------------------------------------------------

namespace {

// The rule as the server prints the invalid value (apiextensions.ValidationRule{...}).
std::string RenderRule(const json& rule) {
  auto str = [&](const char* k) { return DoubleQuote(rule.value(k, "")); };
  std::string reason = rule.contains("reason")
                           ? "(*apiextensions.FieldValueErrorReason)(" + str("reason") + ")"
                           : "(*apiextensions.FieldValueErrorReason)(nil)";
  std::string opt = rule.contains("optionalOldSelf")
                        ? std::string("(*bool)(") +
                              (rule.value("optionalOldSelf", false) ? "true" : "false") + ")"
                        : "(*bool)(nil)";
  return "apiextensions.ValidationRule{Rule:" + str("rule") + ", Message:" + str("message") +
         ", MessageExpression:" + str("messageExpression") + ", Reason:" + reason +
         ", FieldPath:" + str("fieldPath") + ", OptionalOldSelf:" + opt + "}";
}

std::string ExceedsMessage(const std::string& what, double factor) {
  std::ostringstream f;
  if (factor > 100) {
    f << "more than 100x";
  } else if (factor < 1.5) {
    f.setf(std::ios::fixed);
    f.precision(6);
    f << factor << "x";
  } else {
    f.setf(std::ios::fixed);
    f.precision(1);
    f << factor << "x";
  }
  return what + " exceeds budget by factor of " + f.str() +
         " (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where "
         "arrays, "
         "maps, and strings are declared)";
}

struct CrdRuleChecker {
  std::vector<StatusCause>& out;
  std::uint64_t total = 0;
  std::vector<std::string> rule_paths;  // every rule, for the "contributed" causes

  static std::uint64_t Mul(std::uint64_t a, std::uint64_t b) {
    if (a == 0 || b == 0) return 0;
    return a > UINT64_MAX / b ? UINT64_MAX : a * b;
  }

  void Walk(const json& s, const std::string& path, std::uint64_t cardinality) {
    if (!s.is_object()) return;
    if (auto xv = s.find("x-kubernetes-validations"); xv != s.end() && xv->is_array()) {
      for (std::size_t i = 0; i < xv->size(); ++i)
        Check((*xv)[i], s, path + ".x-kubernetes-validations[" + std::to_string(i) + "]",
              cardinality);
    }
    if (auto p = s.find("properties"); p != s.end() && p->is_object())
      for (auto it = p->begin(); it != p->end(); ++it)
        Walk(*it, path + ".properties[" + it.key() + "]", cardinality);
    if (const json* items = Items(s))
      Walk(*items, path + ".items", Mul(cardinality, cel::MaxListItems(s)));
    if (const json* add = AdditionalProps(s))
      Walk(*add, path + ".additionalProperties", Mul(cardinality, cel::MaxMapProperties(s)));
  }

  void Check(const json& rule, const json& s, const std::string& rpath, std::uint64_t cardinality) {
    if (!rule.is_object() || !rule.contains("rule") || !rule["rule"].is_string() ||
        rule["rule"].get<std::string>().empty()) {
      out.push_back(RequiredCause(rpath + ".rule"));
      return;
    }
    const std::string text = rule["rule"].get<std::string>();
    cel::Declarations decls = {{"self", s}, {"oldSelf", s}};
    cel::Program prog(text);
    std::string err = prog.ok() ? prog.Check(decls) : prog.error();
    if (!err.empty()) {
      out.push_back({"FieldValueInvalid",
                     "Invalid value: " + RenderRule(rule) + ": compilation failed: " + err,
                     rpath + ".rule"});
      return;
    }
    if (rule.contains("messageExpression")) {
      const json& me = rule["messageExpression"];
      cel::Program mp(me.is_string() ? me.get<std::string>() : "");
      std::string merr = mp.ok() ? mp.Check(decls) : mp.error();
      if (!merr.empty())
        out.push_back(
            {"FieldValueInvalid",
             "Invalid value: " + DoubleQuote(me.is_string() ? me.get<std::string>() : "") +
                 ": messageExpression compilation failed: " + merr,
             rpath + ".messageExpression"});
    }
    if (prog.References("oldSelf") && s.is_object() && rule.contains("optionalOldSelf") == false) {
      // Transition rules need an old value to correlate with; fine on any schema node here
      // (the server refuses them only under atomic lists, which the walker cannot see).
    }
    std::uint64_t cost = Mul(prog.EstimateCost(decls).max, cardinality);
    rule_paths.push_back(rpath + ".rule");
    total = total > UINT64_MAX - cost ? UINT64_MAX : total + cost;
    if (cost > kCelPerRuleCostLimit)
      out.push_back(ForbiddenCause(
          rpath + ".rule",
          ExceedsMessage("estimated rule cost", static_cast<double>(cost) / kCelPerRuleCostLimit)));
  }
};

}  // namespace

std::vector<StatusCause> ValidateCrdValidationRules(const json& crd) {
  std::vector<StatusCause> out;
  const json spec = crd.value("spec", json::object());
  const json versions = spec.is_object() ? spec.value("versions", json::array()) : json::array();
  if (!versions.is_array()) return out;
  // One schema shared by every version is reported where the server keeps it internally.
  bool shared = !versions.empty();
  const json* first = nullptr;
  for (const auto& v : versions) {
    const json* s = v.is_object() && v.contains("schema") && v["schema"].is_object() &&
                            v["schema"].contains("openAPIV3Schema")
                        ? &v["schema"]["openAPIV3Schema"]
                        : nullptr;
    if (!first) first = s;
    if (!s || !first || *s != *first) shared = false;
  }
  auto check = [&](const json& schema, const std::string& root) {
    CrdRuleChecker c{out};
    c.Walk(schema, root, 1);
    if (c.total > kCelPerCrdCostLimit) {
      for (const auto& p : c.rule_paths)
        out.push_back(ForbiddenCause(p,
                                     "contributed to estimated rule cost total exceeding cost "
                                     "limit for entire OpenAPIv3 schema"));
      out.push_back(ForbiddenCause(
          root,
          ExceedsMessage(
              "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
              static_cast<double>(c.total) / kCelPerCrdCostLimit)));
    }
  };
  if (shared && first) {
    check(*first, "spec.validation.openAPIV3Schema");
    return out;
  }
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const json& v = versions[i];
    if (v.is_object() && v.contains("schema") && v["schema"].is_object() &&
        v["schema"].contains("openAPIV3Schema"))
      check(v["schema"]["openAPIV3Schema"],
            "spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema");
  }
  return out;
}

}  // namespace gg::sim
