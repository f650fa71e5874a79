// RBAC authorizer for the simulator: Roles/ClusterRoles/RoleBindings/ClusterRoleBindings as
// generic JSON (from manifests or created through the API), evaluated like the real RBAC
// authorizer (rbac/v1 PolicyRule semantics). It also records which permissions were used,
// so tests can show shipped RBAC is minimal.
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/status.h"

namespace gg::sim {

// Request attributes (k8s.io/apiserver authorizer.Attributes).
struct Attributes {
  std::string user;                 // "system:serviceaccount:NS:NAME"
  std::vector<std::string> groups;  // see ServiceAccountGroups
  std::string verb;         // get list watch create update patch delete deletecollection ...
  std::string api_group;    // "" core
  std::string resource;     // plural
  std::string subresource;  // "status", "eviction", ""
  std::string namespace_;   // "" for cluster-scoped or all-namespaces
  std::string name;         // "" for collections / create without a name
  bool is_resource_request = true;
  std::string path;        // for non-resource requests ("/healthz", "/version", ...)
  bool record_use = true;  // false: a what-if question (SubjectAccessReview), not a use
};

struct Decision {
  bool allowed = false;
  std::string reason;  // "RBAC: allowed by ClusterRoleBinding \"x\" of ClusterRole \"y\" ..."
};

// "system:serviceaccount:NS:NAME".
std::string ServiceAccountUser(std::string_view ns, std::string_view name);
// {"system:serviceaccounts", "system:serviceaccounts:NS", "system:authenticated"}.
std::vector<std::string> ServiceAccountGroups(std::string_view ns);

// The 403 body the real server returns:
// "<user> cannot <verb> resource \"<resource>[/<sub>]\" in API group \"<group>\"
//  [in the namespace \"<ns>\"|at the cluster scope]" (name form: pods "x" is forbidden: ...).
nlohmann::json ForbiddenStatus(const Attributes& a);

// A permission actually granted and used, for minimality checks.
struct UsedPermission {
  std::string verb, api_group, resource, subresource;
  auto operator<=>(const UsedPermission&) const = default;
};

class Authorizer {
 public:
  // Adds/replaces (by kind+namespace+name) one rbac.authorization.k8s.io/v1 object; other
  // kinds are ignored (returns OK) so a whole manifest set can be fed in.
  Status Add(const nlohmann::json& obj);
  // Removes a previously added object (no-op when absent).
  void Remove(std::string_view kind, std::string_view ns, std::string_view name);
  // Adds every RBAC object from a multi-document YAML text (List kinds are expanded).
  Status AddYaml(std::string_view yaml_text);

  // Thread-safe. Records the (verb, group, resource, subresource) of allowed requests.
  Decision Authorize(const Attributes& a);

  // Per user: the permissions that were allowed at least once.
  std::map<std::string, std::set<UsedPermission>> UsedPermissions() const;
  // The rules granted to `user`/`groups` in namespace `ns` (cluster rules included), each
  // expanded to (verb, group, resource[/sub]) tuples with '*' left as is, minus those used.
  std::vector<UsedPermission> GrantedButUnused(const std::string& user,
                                               const std::vector<std::string>& groups,
                                               std::string_view ns = "") const;

  size_t RoleCount() const;
  size_t BindingCount() const;

 private:
  struct Rule {
    std::vector<std::string> verbs, api_groups, resources, resource_names, non_resource_urls;
  };
  struct Role {
    std::vector<Rule> rules;
    nlohmann::json aggregation;  // ClusterRole aggregationRule.clusterRoleSelectors
    std::map<std::string, std::string> labels;
  };
  struct Subject {
    std::string kind, name, ns;
  };
  struct Binding {
    std::string kind, ns, name;  // RoleBinding or ClusterRoleBinding
    std::string role_kind, role_name;
    std::vector<Subject> subjects;
  };

  static bool RuleAllows(const Rule& r, const Attributes& a);
  static bool SubjectMatches(const Subject& s, const std::string& user,
                             const std::vector<std::string>& groups, std::string_view binding_ns);
  std::vector<Rule> RulesOf(std::string_view role_kind, std::string_view ns,
                            std::string_view name) const;  // with aggregation

  mutable std::mutex mu_;
  std::map<std::string, Role> roles_;  // key "ClusterRole//name" or "Role/ns/name"
  std::map<std::string, Binding> bindings_;
  std::map<std::string, std::set<UsedPermission>> used_;
};

// Parses multi-document YAML into JSON values (one per non-empty document). Errors name
// the line: "yaml: line 12: ...". Shared by scenario files.
StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(std::string_view text);

}  // namespace gg::sim
