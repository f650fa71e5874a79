// RBAC evaluation (rbac/v1 PolicyRule semantics of the real authorizer) and YAML → JSON.
#include "sim/rbac.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "sim/api_error.h"
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;

std::string ServiceAccountUser(std::string_view ns, std::string_view name) {
  return "system:serviceaccount:" + std::string(ns) + ":" + std::string(name);
}

std::vector<std::string> ServiceAccountGroups(std::string_view ns) {
  return {"system:serviceaccounts", "system:serviceaccounts:" + std::string(ns),
          "system:authenticated"};
}

json ForbiddenStatus(const Attributes& a) {
  ApiError e;
  e.code = 403;
  e.reason = "Forbidden";
  std::string user = "User \"" + a.user + "\"";
  if (!a.is_resource_request) {
    e.message = "forbidden: " + user + " cannot " + a.verb + " path \"" + a.path + "\"";
    return e.ToJson();
  }
  std::string res = a.resource + (a.subresource.empty() ? "" : "/" + a.subresource);
  std::string why = user + " cannot " + a.verb + " resource \"" + res + "\" in API group \"" +
                    a.api_group + "\"" +
                    (a.namespace_.empty() ? " at the cluster scope"
                                          : " in the namespace \"" + a.namespace_ + "\"");
  std::string qr = QualifiedResource(a.resource, a.api_group);
  e.message = a.name.empty() ? qr + " is forbidden: " + why
                             : qr + " \"" + a.name + "\" is forbidden: " + why;
  e.name = a.name;
  e.group = a.api_group;
  e.kind = a.resource;
  return e.ToJson();
}

namespace {

std::string Key(std::string_view kind, std::string_view ns, std::string_view name) {
  return std::string(kind) + "/" + std::string(ns) + "/" + std::string(name);
}

StatusOr<std::vector<std::string>> Strings(const json& obj, const char* key,
                                           const std::string& where) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array())
    return InvalidArgumentError(where + "." + key + " must be a list of strings");
  for (const auto& v : *it) {
    if (!v.is_string())
      return InvalidArgumentError(where + "." + key + " must be a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

bool Has(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

Status Authorizer::Add(const json& obj) {
  if (!obj.is_object()) return InvalidArgumentError("RBAC object must be a JSON object");
  std::string kind = obj.value("kind", json("")).is_string() ? obj.value("kind", "") : "";
  if (kind == "List") {
    auto items = obj.find("items");
    if (items != obj.end() && items->is_array())
      for (const auto& i : *items) GG_RETURN_IF_ERROR(Add(i));
    return OkStatus();
  }
  if (kind != "Role" && kind != "ClusterRole" && kind != "RoleBinding" &&
      kind != "ClusterRoleBinding")
    return OkStatus();
  const json& md = obj.value("metadata", json::object());
  if (!md.is_object() || !md.value("name", json()).is_string())
    return InvalidArgumentError(kind + ": metadata.name is required");
  std::string name = md["name"].get<std::string>();
  std::string ns =
      kind == "Role" || kind == "RoleBinding"
          ? (md.value("namespace", json()).is_string() ? md["namespace"].get<std::string>()
                                                       : "default")
          : "";
  std::string where = kind + " " + (ns.empty() ? "" : ns + "/") + name;
  if (kind == "Role" || kind == "ClusterRole") {
    Role role;
    auto rules = obj.find("rules");
    if (rules != obj.end() && !rules->is_null()) {
      if (!rules->is_array()) return InvalidArgumentError(where + ": rules must be a list");
      for (size_t i = 0; i < rules->size(); ++i) {
        const json& r = (*rules)[i];
        std::string rw = where + ": rules[" + std::to_string(i) + "]";
        if (!r.is_object()) return InvalidArgumentError(rw + " must be an object");
        Rule rule;
        GG_ASSIGN_OR_RETURN(rule.verbs, Strings(r, "verbs", rw));
        GG_ASSIGN_OR_RETURN(rule.api_groups, Strings(r, "apiGroups", rw));
        GG_ASSIGN_OR_RETURN(rule.resources, Strings(r, "resources", rw));
        GG_ASSIGN_OR_RETURN(rule.resource_names, Strings(r, "resourceNames", rw));
        GG_ASSIGN_OR_RETURN(rule.non_resource_urls, Strings(r, "nonResourceURLs", rw));
        if (rule.verbs.empty())
          return InvalidArgumentError(
              rw + ".verbs: Required value: verbs must contain at least one value");
        role.rules.push_back(std::move(rule));
      }
    }
    if (auto ag = obj.find("aggregationRule"); ag != obj.end() && ag->is_object())
      role.aggregation = ag->value("clusterRoleSelectors", json());
    if (auto l = md.find("labels"); l != md.end() && l->is_object())
      for (auto it = l->begin(); it != l->end(); ++it)
        if (it->is_string()) role.labels[it.key()] = it->get<std::string>();
    std::scoped_lock lock(mu_);
    roles_[Key(kind, ns, name)] = std::move(role);
    return OkStatus();
  }
  Binding b;
  b.kind = kind;
  b.ns = ns;
  b.name = name;
  const json& ref = obj.value("roleRef", json());
  if (!ref.is_object() || !ref.value("kind", json()).is_string() ||
      !ref.value("name", json()).is_string())
    return InvalidArgumentError(where + ": roleRef.kind and roleRef.name are required");
  b.role_kind = ref["kind"].get<std::string>();
  b.role_name = ref["name"].get<std::string>();
  if (b.role_kind != "Role" && b.role_kind != "ClusterRole")
    return InvalidArgumentError(where + ": roleRef.kind must be Role or ClusterRole");
  if (kind == "ClusterRoleBinding" && b.role_kind != "ClusterRole")
    return InvalidArgumentError(where + ": a ClusterRoleBinding may only reference a ClusterRole");
  auto subjects = obj.find("subjects");
  if (subjects != obj.end() && subjects->is_array()) {
    for (const auto& s : *subjects) {
      if (!s.is_object()) return InvalidArgumentError(where + ": subjects must be objects");
      Subject sub;
      sub.kind = s.value("kind", json()).is_string() ? s["kind"].get<std::string>() : "";
      sub.name = s.value("name", json()).is_string() ? s["name"].get<std::string>() : "";
      sub.ns = s.value("namespace", json()).is_string() ? s["namespace"].get<std::string>() : "";
      if (sub.kind.empty() || sub.name.empty())
        return InvalidArgumentError(where + ": subjects need kind and name");
      b.subjects.push_back(std::move(sub));
    }
  }
  std::scoped_lock lock(mu_);
  bindings_[Key(kind, ns, name)] = std::move(b);
  return OkStatus();
}

void Authorizer::Remove(std::string_view kind, std::string_view ns, std::string_view name) {
  std::string n = (kind == "ClusterRole" || kind == "ClusterRoleBinding") ? "" : std::string(ns);
  std::scoped_lock lock(mu_);
  roles_.erase(Key(kind, n, name));
  bindings_.erase(Key(kind, n, name));
}

Status Authorizer::AddYaml(std::string_view yaml_text) {
  GG_ASSIGN_OR_RETURN(auto docs, ParseYamlDocuments(yaml_text));
  for (const auto& d : docs) GG_RETURN_IF_ERROR(Add(d));
  return OkStatus();
}

bool Authorizer::RuleAllows(const Rule& r, const Attributes& a) {
  if (!Has(r.verbs, a.verb) && !Has(r.verbs, "*")) return false;
  if (!a.is_resource_request) {
    for (const auto& u : r.non_resource_urls) {
      if (u == "*" || u == a.path) return true;
      if (!u.empty() && u.back() == '*' && a.path.rfind(u.substr(0, u.size() - 1), 0) == 0)
        return true;
    }
    return false;
  }
  if (!Has(r.api_groups, a.api_group) && !Has(r.api_groups, "*")) return false;
  std::string combined = a.resource + (a.subresource.empty() ? "" : "/" + a.subresource);
  bool res = false;
  for (const auto& rr : r.resources) {
    if (rr == "*" || rr == combined)
      res = true;
    else if (!a.subresource.empty() && rr == "*/" + a.subresource)
      res = true;
    if (res) break;
  }
  if (!res) return false;
  if (r.resource_names.empty()) return true;
  return !a.name.empty() && Has(r.resource_names, a.name);
}

bool Authorizer::SubjectMatches(const Subject& s, const std::string& user,
                                const std::vector<std::string>& groups,
                                std::string_view binding_ns) {
  if (s.kind == "User") return s.name == user;
  if (s.kind == "Group") return Has(groups, s.name);
  if (s.kind == "ServiceAccount") {
    std::string ns = s.ns.empty() ? std::string(binding_ns) : s.ns;
    return ServiceAccountUser(ns, s.name) == user;
  }
  return false;
}

std::vector<Authorizer::Rule> Authorizer::RulesOf(std::string_view role_kind, std::string_view ns,
                                                  std::string_view name) const {
  std::vector<Rule> out;
  auto it = roles_.find(Key(role_kind, role_kind == "ClusterRole" ? "" : ns, name));
  if (it == roles_.end()) return out;
  out = it->second.rules;
  const json& sels = it->second.aggregation;
  if (role_kind == "ClusterRole" && sels.is_array()) {
    for (const auto& [key, role] : roles_) {
      if (key.rfind("ClusterRole//", 0) != 0 || key == it->first) continue;
      FieldMap labels(role.labels.begin(), role.labels.end());
      for (const auto& sel : sels) {
        auto ls = LabelSelector::FromJson(sel);
        if (ls.ok() && !ls->Empty() && ls->Matches(labels)) {
          out.insert(out.end(), role.rules.begin(), role.rules.end());
          break;
        }
      }
    }
  }
  return out;
}

Decision Authorizer::Authorize(const Attributes& a) {
  std::scoped_lock lock(mu_);
  Decision d;
  auto allow = [&](const std::string& why) {
    d.allowed = true;
    d.reason = why;
    if (!a.record_use) return d;
    if (a.is_resource_request)
      used_[a.user].insert({a.verb, a.api_group, a.resource, a.subresource});
    else
      used_[a.user].insert({a.verb, "", a.path, ""});
    return d;
  };
  if (Has(a.groups, "system:masters")) return allow("RBAC: allowed by group system:masters");
  for (const auto& [key, b] : bindings_) {
    if (b.kind == "RoleBinding" && (!a.is_resource_request || a.namespace_ != b.ns)) continue;
    bool subject = std::any_of(
        b.subjects.begin(), b.subjects.end(),
        [&, &ns = b.ns](const Subject& s) { return SubjectMatches(s, a.user, a.groups, ns); });
    if (!subject) continue;
    for (const auto& r : RulesOf(b.role_kind, b.ns, b.role_name))
      if (RuleAllows(r, a))
        return allow("RBAC: allowed by " + b.kind + " \"" + b.name + "\" of " + b.role_kind +
                     " \"" + b.role_name + "\" to " + a.user);
  }
  d.reason = "RBAC: no rule allows the request";
  return d;
}

std::map<std::string, std::set<UsedPermission>> Authorizer::UsedPermissions() const {
  std::scoped_lock lock(mu_);
  return used_;
}

std::vector<UsedPermission> Authorizer::GrantedButUnused(const std::string& user,
                                                         const std::vector<std::string>& groups,
                                                         std::string_view ns) const {
  std::scoped_lock lock(mu_);
  std::set<UsedPermission> granted;
  std::vector<Rule> rules;
  for (const auto& [key, b] : bindings_) {
    if (b.kind == "RoleBinding" && !ns.empty() && b.ns != ns) continue;
    bool subject = std::any_of(
        b.subjects.begin(), b.subjects.end(),
        [&, &ns = b.ns](const Subject& s) { return SubjectMatches(s, user, groups, ns); });
    if (!subject) continue;
    for (auto& r : RulesOf(b.role_kind, b.ns, b.role_name)) rules.push_back(r);
  }
  auto used_it = used_.find(user);
  static const std::set<UsedPermission> kNone;
  const auto& used = used_it == used_.end() ? kNone : used_it->second;
  std::vector<UsedPermission> out;
  for (const auto& r : rules) {
    for (const auto& verb : r.verbs) {
      for (const auto& u : r.non_resource_urls) granted.insert({verb, "", u, ""});
      for (const auto& g : r.api_groups)
        for (const auto& res : r.resources) {
          size_t slash = res.find('/');
          UsedPermission p{verb, g, slash == std::string::npos ? res : res.substr(0, slash),
                           slash == std::string::npos ? "" : res.substr(slash + 1)};
          granted.insert(p);
        }
    }
  }
  for (const auto& p : granted) {
    bool hit = std::any_of(used.begin(), used.end(), [&](const UsedPermission& u) {
      auto m = [](const std::string& pat, const std::string& v) { return pat == "*" || pat == v; };
      return m(p.verb, u.verb) && m(p.api_group, u.api_group) && m(p.resource, u.resource) &&
             (p.subresource == u.subresource || p.subresource == "*");
    });
    if (!hit) out.push_back(p);
  }
  return out;
}

size_t Authorizer::RoleCount() const {
  std::scoped_lock lock(mu_);
  return roles_.size();
}
size_t Authorizer::BindingCount() const {
  std::scoped_lock lock(mu_);
  return bindings_.size();
}

// ---- YAML → JSON ---------------------------------------------------------------------

namespace {

json Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str") return s;  // quoted / explicit str
  if (n.Tag() == "tag:yaml.org,2002:int" || n.Tag() == "tag:yaml.org,2002:float" ||
      n.Tag() == "?") {
    static const std::regex kInt(R"([-+]?[0-9]+)");
    static const std::regex kHex(R"(0x[0-9a-fA-F]+)");
    static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
    // YAML 1.1 booleans, as sigs.k8s.io/yaml (go-yaml v2) reads them.
    for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"})
      if (s == t) return true;
    for (const char* f :
         {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"})
      if (s == f) return false;
    if (s.size() < 40 && std::regex_match(s, kInt)) {
      try {
        return static_cast<int64_t>(std::stoll(s));
      } catch (...) {
        return std::stod(s);
      }
    }
    if (s.size() < 20 && std::regex_match(s, kHex))
      return static_cast<int64_t>(std::stoll(s, nullptr, 16));
    if (s.size() < 64 && std::regex_match(s, kFloat)) {
      try {
        return std::stod(s);
      } catch (...) {
        return s;
      }
    }
  }
  return s;
}

StatusOr<json> ToJson(const YAML::Node& n, int depth) {
  if (depth > 200) return InvalidArgumentError("yaml: document nested too deeply");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      return Scalar(n);
    case YAML::NodeType::Sequence: {
      json arr = json::array();
      for (const auto& e : n) {
        GG_ASSIGN_OR_RETURN(json v, ToJson(e, depth + 1));
        arr.push_back(std::move(v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      json obj = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          return InvalidArgumentError("yaml: line " + std::to_string(kv.first.Mark().line + 1) +
                                      ": mapping keys must be scalars");
        GG_ASSIGN_OR_RETURN(json v, ToJson(kv.second, depth + 1));
        obj[kv.first.Scalar()] = std::move(v);
      }
      return obj;
    }
  }
  return json(nullptr);
}

}  // namespace

StatusOr<std::vector<json>> ParseYamlDocuments(std::string_view text) {
  std::vector<json> out;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("yaml: line " + std::to_string(e.mark.line + 1) + ", column " +
                                std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("yaml: ") + e.what());
  }
  for (const auto& d : docs) {
    if (d.IsNull()) continue;
    try {
      GG_ASSIGN_OR_RETURN(json j, ToJson(d, 0));
      out.push_back(std::move(j));
    } catch (const YAML::Exception& e) {
      return InvalidArgumentError("yaml: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
  }
  return out;
}

}  // namespace gg::sim
