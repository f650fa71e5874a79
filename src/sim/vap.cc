// ValidatingAdmissionPolicy matching and evaluation (see vap.h).
#include "sim/vap.h"

#include <algorithm>
#include <set>

#include "sim/cel/cel.h"
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;

namespace {

// The variables a policy's expressions may reference (all typed `dyn` here).
const cel::Declarations& PolicyDeclarations() {
  static const cel::Declarations d = {{"object", nullptr},          {"oldObject", nullptr},
                                      {"request", nullptr},         {"params", nullptr},
                                      {"namespaceObject", nullptr}, {"variables", nullptr},
                                      {"authorizer", nullptr}};
  return d;
}

std::string CompileError(const std::string& expr) {
  cel::Program p(expr);
  if (!p.ok()) return p.error();
  return p.Check(PolicyDeclarations());
}

bool Contains(const json& list, const std::string& v) {
  if (!list.is_array()) return false;
  for (const auto& e : list)
    if (e.is_string() && (e.get<std::string>() == "*" || e.get<std::string>() == v)) return true;
  return false;
}

bool ResourceMatches(const json& resources, const std::string& res, const std::string& sub) {
  if (!resources.is_array()) return false;
  for (const auto& e : resources) {
    if (!e.is_string()) continue;
    std::string s = e.get<std::string>();
    if (s == "*/*") return true;
    auto slash = s.find('/');
    std::string r = s.substr(0, slash);
    std::string sr = slash == std::string::npos ? "" : s.substr(slash + 1);
    if (slash == std::string::npos) {
      if (sub.empty() && (r == "*" || r == res)) return true;
    } else if ((r == "*" || r == res) && (sr == "*" || sr == sub)) {
      return true;
    }
  }
  return false;
}

bool RuleMatches(const json& rule, const VapRequest& r) {
  if (!rule.is_object()) return false;
  if (!Contains(rule.value("apiGroups", json::array()), r.group)) return false;
  if (!Contains(rule.value("apiVersions", json::array()), r.version)) return false;
  if (!Contains(rule.value("operations", json::array()), r.operation)) return false;
  if (!ResourceMatches(rule.value("resources", json::array()), r.resource, r.subresource))
    return false;
  std::string scope = rule.value("scope", "*");
  if (scope == "Cluster" && r.namespaced) return false;
  if (scope == "Namespaced" && !r.namespaced) return false;
  const json names = rule.value("resourceNames", json::array());
  if (names.is_array() && !names.empty()) {
    bool found = false;
    for (const auto& n : names)
      if (n == r.name) found = true;
    if (!found) return false;
  }
  return true;
}

json Labels(const json* obj) {
  if (!obj || !obj->is_object()) return json::object();
  auto md = obj->find("metadata");
  if (md == obj->end() || !md->is_object()) return json::object();
  return md->value("labels", json::object());
}

bool SelectorMatches(const json& sel, const json& labels) {
  if (!sel.is_object()) return true;  // absent: everything
  auto ls = LabelSelector::FromJson(sel);
  if (!ls.ok()) return false;
  return ls->MatchesJson(labels);
}

// matchConstraints (policy) or matchResources (binding). `require_rules`: an empty
// resourceRules list matches nothing (policy) rather than everything (binding).
bool MatchResources(const json& m, const VapRequest& r, bool require_rules) {
  if (!m.is_object()) return !require_rules;
  if (m.contains("namespaceSelector")) {
    const json& sel = m["namespaceSelector"];
    if (r.resource == "namespaces" && r.group.empty()) {
      if (!SelectorMatches(sel, Labels(r.object ? r.object : r.old_object))) return false;
    } else if (r.namespaced) {
      if (!SelectorMatches(sel, Labels(r.namespace_object))) return false;
    }
  }
  if (m.contains("objectSelector")) {
    const json& sel = m["objectSelector"];
    bool any = (r.object && SelectorMatches(sel, Labels(r.object))) ||
               (r.old_object && SelectorMatches(sel, Labels(r.old_object)));
    if (!any) return false;
  }
  const json rules = m.value("resourceRules", json::array());
  if (rules.is_array() && !rules.empty()) {
    bool hit = false;
    for (const auto& rule : rules) hit = hit || RuleMatches(rule, r);
    if (!hit) return false;
  } else if (require_rules) {
    return false;
  }
  for (const auto& rule : m.value("excludeResourceRules", json::array()))
    if (RuleMatches(rule, r)) return false;
  return true;
}

json RequestObject(const VapRequest& r) {
  json user = {{"username", r.user},
               {"uid", ""},
               {"groups", r.groups},
               {"extra", r.extra.is_object() ? r.extra : json::object()}};
  json kind = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
  json res = {{"group", r.group}, {"version", r.version}, {"resource", r.resource}};
  json options = json::object();
  if (r.operation == "CREATE")
    options = {{"kind", "CreateOptions"}, {"apiVersion", "meta.k8s.io/v1"}};
  if (r.operation == "UPDATE")
    options = {{"kind", "UpdateOptions"}, {"apiVersion", "meta.k8s.io/v1"}};
  return {{"uid", ""},
          {"kind", kind},
          {"resource", res},
          {"subResource", r.subresource},
          {"requestKind", kind},
          {"requestResource", res},
          {"requestSubResource", r.subresource},
          {"name", r.name},
          {"namespace", r.ns},
          {"operation", r.operation},
          {"userInfo", user},
          {"dryRun", r.dry_run},
          {"options", options}};
}

int ReasonCode(const std::string& reason) {
  if (reason == "Unauthorized") return 401;
  if (reason == "Forbidden") return 403;
  if (reason == "RequestEntityTooLarge") return 413;
  return 422;
}

// One binding's failures, applied per its validationActions: the first Deny becomes the
// decision's error, every Warn a warning.
struct BindingFailures {
  const VapRequest& r;
  std::string pname, bname;
  std::set<std::string> actions;
  VapDecision& out;

  void Fail(const std::string& message, const std::string& reason) const {
    if (actions.count("Deny") && !out.deny) {
      std::string cause = "ValidatingAdmissionPolicy '" + pname + "' with binding '" + bname +
                          "' denied request: " + message;
      ApiError e;
      e.reason = reason.empty() ? "Invalid" : reason;
      e.code = ReasonCode(e.reason);
      e.message =
          QualifiedResource(r.resource, r.group) + " \"" + r.name + "\" is forbidden: " + cause;
      e.name = r.name;
      e.group = r.group;
      e.kind = r.resource;
      e.causes.push_back({"", cause, ""});
      out.deny = std::move(e);
    }
    if (actions.count("Warn"))
      out.warnings.push_back("Validation failed for ValidatingAdmissionPolicy '" + pname +
                             "' with binding '" + bname + "': " + message);
  }
};

}  // namespace

struct VapEngine::Policy {
  json obj;
  struct Expr {
    std::string name, text, message, reason;
    std::shared_ptr<cel::Program> prog, message_prog;
  };
  std::vector<Expr> match_conditions, variables, validations;

  // False when a matchCondition is false or cannot be evaluated (a failure when fail_closed).
  bool MatchConditionsHold(const std::map<std::string, json>& vars, bool fail_closed,
                           const BindingFailures& f) const {
    for (const auto& mc : match_conditions) {
      cel::Value v = mc.prog->Eval(vars);
      if (!v.ok() || !v.v.is_boolean()) {
        if (fail_closed)
          f.Fail("failed to evaluate matchCondition '" + mc.name +
                     "': " + (v.ok() ? "not a bool" : v.error),
                 "");
        return false;
      }
      if (!v.v.get<bool>()) return false;
    }
    return true;
  }

  // Each validation that is false (its message, or messageExpression when that yields one
  // line) or cannot be evaluated (when fail_closed) is a failure.
  void Validate(const std::map<std::string, json>& vars, bool fail_closed,
                const BindingFailures& f) const {
    for (const auto& val : validations) {
      cel::Value v = val.prog->Eval(vars);
      if (!v.ok() || !v.v.is_boolean()) {
        if (fail_closed)
          f.Fail("expression '" + val.text +
                     "' resulted in error: " + (v.ok() ? "no such overload" : v.error),
                 val.reason);
        continue;
      }
      if (v.v.get<bool>()) continue;
      std::string msg = val.message.empty() ? "failed expression: " + val.text : val.message;
      if (val.message_prog && val.message_prog->ok()) {
        cel::Value m = val.message_prog->Eval(vars);
        if (m.ok() && m.v.is_string() && !m.v.get<std::string>().empty() &&
            m.v.get<std::string>().find('\n') == std::string::npos)
          msg = m.v.get<std::string>();
      }
      f.Fail(msg, val.reason);
    }
  }
};

VapEngine::VapEngine() = default;
VapEngine::~VapEngine() = default;

void VapEngine::Observe(const std::string& kind, const std::string& name, const json* obj) {
  std::scoped_lock lock(mu_);
  if (kind == "ValidatingAdmissionPolicyBinding") {
    if (obj)
      bindings_[name] = *obj;
    else
      bindings_.erase(name);
    return;
  }
  if (!obj) {
    policies_.erase(name);
    return;
  }
  auto p = std::make_shared<Policy>();
  p->obj = *obj;
  const json spec = obj->value("spec", json::object());
  auto compile = [](const json& list, std::vector<Policy::Expr>& out) {
    if (!list.is_array()) return;
    for (const auto& e : list) {
      if (!e.is_object()) continue;
      Policy::Expr x;
      x.name = e.value("name", "");
      x.text = e.value("expression", "");
      x.message = e.value("message", "");
      x.reason = e.value("reason", "");
      x.prog = std::make_shared<cel::Program>(x.text);
      if (e.contains("messageExpression") && e["messageExpression"].is_string())
        x.message_prog = std::make_shared<cel::Program>(e["messageExpression"].get<std::string>());
      out.push_back(std::move(x));
    }
  };
  compile(spec.value("matchConditions", json::array()), p->match_conditions);
  compile(spec.value("variables", json::array()), p->variables);
  compile(spec.value("validations", json::array()), p->validations);
  policies_[name] = std::move(p);
}

bool VapEngine::empty() const {
  std::scoped_lock lock(mu_);
  return bindings_.empty();
}

VapDecision VapEngine::Evaluate(const VapRequest& r) const {
  VapDecision out;
  std::vector<std::pair<std::shared_ptr<const Policy>, json>> active;
  {
    std::scoped_lock lock(mu_);
    for (const auto& [bname, b] : bindings_) {
      std::string pname = b.value("spec", json::object()).value("policyName", "");
      auto it = policies_.find(pname);
      if (it != policies_.end()) active.emplace_back(it->second, b);
    }
  }
  json request;
  bool request_built = false;
  for (const auto& [policy, binding] : active) {
    const json pspec = policy->obj.value("spec", json::object());
    const json bspec = binding.value("spec", json::object());
    if (!MatchResources(pspec.value("matchConstraints", json()), r, true)) continue;
    if (bspec.contains("matchResources") && !MatchResources(bspec["matchResources"], r, false))
      continue;
    const std::string pname = policy->obj.value("metadata", json::object()).value("name", "");
    const std::string bname = binding.value("metadata", json::object()).value("name", "");
    const bool fail_closed = pspec.value("failurePolicy", "Fail") != "Ignore";
    BindingFailures failures{r, pname, bname, {}, out};
    for (const auto& a : bspec.value("validationActions", json::array()))
      if (a.is_string()) failures.actions.insert(a.get<std::string>());
    if (!request_built) {
      request = RequestObject(r);
      request_built = true;
    }
    std::map<std::string, json> vars = {
        {"object", r.object ? *r.object : json()},
        {"oldObject", r.old_object ? *r.old_object : json()},
        {"request", request},
        {"params", json()},
        {"namespaceObject", r.namespace_object ? *r.namespace_object : json()},
        {"variables", json::object()},
    };
    if (pspec.contains("paramKind") && pspec["paramKind"].is_object()) {
      if (fail_closed)
        failures.Fail("failed to configure binding: params are not supported by this simulator",
                      "");
      continue;
    }
    if (!policy->MatchConditionsHold(vars, fail_closed, failures)) continue;
    for (const auto& var : policy->variables) {
      cel::Value v = var.prog->Eval(vars);
      if (v.ok()) vars["variables"][var.name] = v.v;
    }
    policy->Validate(vars, fail_closed, failures);
  }
  return out;
}

std::vector<StatusCause> ValidateVapObject(const json& obj, const std::string& kind) {
  std::vector<StatusCause> out;
  const json spec = obj.value("spec", json());
  if (!spec.is_object()) {
    out.push_back(RequiredCause("spec"));
    return out;
  }
  if (kind == "ValidatingAdmissionPolicyBinding") {
    if (spec.value("policyName", "").empty()) out.push_back(RequiredCause("spec.policyName"));
    const json actions = spec.value("validationActions", json::array());
    if (!actions.is_array() || actions.empty()) {
      out.push_back(
          RequiredCause("spec.validationActions", "at least one validation action is required"));
    } else {
      std::set<std::string> seen;
      for (std::size_t i = 0; i < actions.size(); ++i) {
        std::string a = actions[i].is_string() ? actions[i].get<std::string>() : "";
        std::string f = "spec.validationActions[" + std::to_string(i) + "]";
        if (a != "Deny" && a != "Warn" && a != "Audit")
          out.push_back(NotSupportedCause(f, actions[i], {"Audit", "Deny", "Warn"}));
        else if (!seen.insert(a).second)
          out.push_back(DuplicateCause(f, actions[i]));
      }
      if (seen.count("Deny") && seen.count("Warn"))
        out.push_back(InvalidCause(
            "spec.validationActions", actions,
            "must not contain both Deny and Warn (repeating the same validation failure "
            "information in the API response and headers serves no purpose)"));
    }
    return out;
  }
  std::string fp = spec.value("failurePolicy", "Fail");
  if (fp != "Fail" && fp != "Ignore")
    out.push_back(NotSupportedCause("spec.failurePolicy", fp, {"Fail", "Ignore"}));
  if (!spec.contains("matchConstraints") || !spec["matchConstraints"].is_object()) {
    out.push_back(RequiredCause("spec.matchConstraints"));
  } else {
    const json rules = spec["matchConstraints"].value("resourceRules", json::array());
    if (!rules.is_array() || rules.empty())
      out.push_back(RequiredCause("spec.matchConstraints.resourceRules"));
    for (std::size_t i = 0; rules.is_array() && i < rules.size(); ++i) {
      std::string p = "spec.matchConstraints.resourceRules[" + std::to_string(i) + "]";
      const json ops = rules[i].value("operations", json::array());
      for (std::size_t k = 0; ops.is_array() && k < ops.size(); ++k) {
        std::string op = ops[k].is_string() ? ops[k].get<std::string>() : "";
        if (op != "*" && op != "CREATE" && op != "UPDATE" && op != "DELETE" && op != "CONNECT")
          out.push_back(NotSupportedCause(p + ".operations[" + std::to_string(k) + "]", ops[k],
                                          {"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}));
      }
    }
  }
  const json validations = spec.value("validations", json::array());
  const json audits = spec.value("auditAnnotations", json::array());
  if ((!validations.is_array() || validations.empty()) && (!audits.is_array() || audits.empty()))
    out.push_back(RequiredCause("spec.validations",
                                "validations or auditAnnotations must contain at least one item"));
  auto check_list = [&](const char* list, bool named) {
    const json items = spec.value(list, json::array());
    if (!items.is_array()) return;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const json& e = items[i];
      std::string p = std::string("spec.") + list + "[" + std::to_string(i) + "]";
      if (named && e.value("name", "").empty()) out.push_back(RequiredCause(p + ".name"));
      std::string expr = e.value("expression", "");
      if (expr.empty()) {
        out.push_back(RequiredCause(p + ".expression"));
      } else if (std::string err = CompileError(expr); !err.empty()) {
        out.push_back(InvalidCause(p + ".expression", expr, "compilation failed: " + err));
      }
      if (e.contains("messageExpression") && e["messageExpression"].is_string()) {
        std::string me = e["messageExpression"].get<std::string>();
        if (std::string err = CompileError(me); !err.empty())
          out.push_back(InvalidCause(p + ".messageExpression", me, "compilation failed: " + err));
      }
      if (e.contains("reason")) {
        std::string reason = e.value("reason", "");
        if (reason != "Unauthorized" && reason != "Forbidden" && reason != "Invalid" &&
            reason != "RequestEntityTooLarge")
          out.push_back(
              NotSupportedCause(p + ".reason", e["reason"],
                                {"Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"}));
      }
    }
  };
  check_list("validations", false);
  check_list("matchConditions", true);
  check_list("variables", true);
  return out;
}

}  // namespace gg::sim
