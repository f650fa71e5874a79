#include "operator/escalation_client.h"

#include <cctype>
#include <nlohmann/json.hpp>

namespace gg::op {

using json = nlohmann::json;

StatusOr<k8s::ResourceType> EscalationResource(const std::string& api_version,
                                               const std::string& kind) {
  const size_t slash = api_version.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == api_version.size() || kind.empty()) {
    return InvalidArgumentError("escalation: apiVersion \"" + api_version +
                                "\" must be group/version and kind must be set");
  }
  k8s::ResourceType t;
  t.group = api_version.substr(0, slash);
  t.version = api_version.substr(slash + 1);
  t.kind = kind;
  for (char c : kind) t.resource += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  t.resource += "s";
  t.namespaced = true;
  return t;
}

StatusOr<std::string> BuildRemediationObject(const api::EscalationTemplate& tmpl,
                                             const EscalationOwner& owner,
                                             std::string_view template_json) {
  const std::string where = tmpl.kind + " " + tmpl.namespace_ + "/" + tmpl.name;
  json t = json::parse(template_json, nullptr, /*allow_exceptions=*/false);
  if (t.is_discarded() || !t.is_object()) {
    return InvalidArgumentError("escalation template " + where + ": not a JSON object");
  }
  const json* spec = nullptr;
  if (auto s = t.find("spec"); s != t.end() && s->is_object()) {
    if (auto tt = s->find("template"); tt != s->end() && tt->is_object()) {
      if (auto ss = tt->find("spec"); ss != tt->end() && ss->is_object()) spec = &*ss;
    }
  }
  if (spec == nullptr) {
    return FailedPreconditionError("escalation template " + where +
                                   " has no spec.template.spec object to copy");
  }
  json obj = {{"apiVersion", tmpl.api_version},
              {"kind", tmpl.RemediationKind()},
              {"metadata",
               {{"name", owner.node},
                {"namespace", tmpl.namespace_},
                {"labels",
                 {{"app.kubernetes.io/managed-by", "gpu-guardian"},
                  {std::string(api::kGroup) + "/node", owner.node}}},
                {"annotations",
                 {{std::string(api::kGroup) + "/occurrence", owner.occurrence},
                  {std::string(api::kGroup) + "/policy", owner.policy},
                  {std::string(api::kGroup) + "/template", tmpl.namespace_ + "/" + tmpl.name}}}}},
              {"spec", *spec}};
  return obj.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status EscalationClient::Create(const api::EscalationTemplate& tmpl, const EscalationOwner& owner) {
  auto tmpl_type = EscalationResource(tmpl.api_version, tmpl.kind);
  if (!tmpl_type.ok()) return tmpl_type.status();
  auto rem_type = EscalationResource(tmpl.api_version, tmpl.RemediationKind());
  if (!rem_type.ok()) return rem_type.status();
  auto body = client_.Get(*tmpl_type, tmpl.namespace_, tmpl.name);
  if (!body.ok()) return body.status();
  auto obj = BuildRemediationObject(tmpl, owner, *body);
  if (!obj.ok()) return obj.status();
  auto created = client_.Create(*rem_type, tmpl.namespace_, *obj);
  if (!created.ok() && !IsAlreadyExists(created.status())) return created.status();
  return OkStatus();
}

Status EscalationClient::Delete(const remediation::EscalationRecord& rec) {
  auto type = EscalationResource(rec.api_version, rec.kind);
  if (!type.ok()) return type.status();
  Status s = client_.Delete(*type, rec.namespace_, rec.name);
  if (!s.ok() && !IsNotFound(s)) return s;
  return OkStatus();
}

}  // namespace gg::op
