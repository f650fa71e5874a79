// ApiCore::Review: SelfSubjectAccessReview (kubectl auth can-i), SubjectAccessReview,
// LocalSubjectAccessReview and SelfSubjectReview (kubectl auth whoami). Evaluated through the
// simulator's RBAC authorizer when --authz rbac is on; every request is allowed otherwise
// (the AlwaysAllow authorizer: allowed, no reason). Nothing is stored.
#include "sim/api.h"
#include "sim/rbac.h"

namespace gg::sim {

using nlohmann::json;

namespace {

std::string Str(const json& o, const char* k) {
  return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : "";
}

}  // namespace

ApiResult ApiCore::Review(const Target& t, json body, const ApiRequest& req) {
  const auto& ri = *t.ri;
  if (!body.is_object())
    return ApiResult::Err(BadRequestErr("the body of the request must be a JSON object"));
  if (body.contains("kind") && body["kind"].is_string() && body["kind"] != ri.kind)
    return ApiResult::Err(BadRequestErr("the object kind \"" + body["kind"].get<std::string>() +
                                        "\" does not match the expected kind \"" + ri.kind + "\""));
  // Users as the authenticator saw them: "" is the allow-all mode's anonymous admin.
  std::string user = req.user.empty() ? "admin" : req.user;
  std::vector<std::string> groups =
      req.user.empty() ? std::vector<std::string>{"system:masters", "system:authenticated"}
                       : req.groups;
  json out = {{"kind", ri.kind},
              {"apiVersion", ri.ApiVersion()},
              {"metadata", {{"creationTimestamp", nullptr}}}};
  if (ri.resource == "selfsubjectreviews") {
    json info = {{"username", user}, {"groups", groups}};
    out["status"] = {{"userInfo", info}};
    return ApiResult{std::nullopt, std::move(out), 201};
  }
  json spec = body.value("spec", json::object());
  if (!spec.is_object()) spec = json::object();
  const json ra = spec.value("resourceAttributes", json());
  const json nra = spec.value("nonResourceAttributes", json());
  std::vector<StatusCause> causes;
  if (ra.is_object() == nra.is_object())
    causes.push_back(
        {"FieldValueInvalid",
         std::string("Invalid value: \"") + (ra.is_object() ? "{...}" : "null") +
             "\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
         "spec.resourceAttributes"});
  if (ri.resource != "selfsubjectaccessreviews") {
    // SubjectAccessReview asks about someone else: user or groups required.
    std::vector<std::string> sgroups;
    for (const auto& g : spec.value("groups", json::array()))
      if (g.is_string()) sgroups.push_back(g.get<std::string>());
    if (Str(spec, "user").empty() && sgroups.empty())
      causes.push_back({"FieldValueInvalid",
                        "Invalid value: \"\": at least one of user or group must be specified",
                        "spec.user"});
    if (ri.resource == "localsubjectaccessreviews" && ra.is_object() &&
        Str(ra, "namespace") != t.ns)
      causes.push_back(
          {"FieldValueInvalid",
           "Invalid value: \"" + Str(ra, "namespace") + "\": must match metadata.namespace",
           "spec.resourceAttributes.namespace"});
    user = Str(spec, "user");
    groups = sgroups;
  }
  if (!causes.empty()) return ApiResult::Err(InvalidErr(ri.kind, ri.group, "", std::move(causes)));
  json status = {{"allowed", true}};
  if (authorizer_) {
    Attributes a;
    a.user = user;
    a.groups = groups;
    a.record_use = false;
    if (ra.is_object()) {
      a.verb = Str(ra, "verb");
      a.api_group = Str(ra, "group");
      a.resource = Str(ra, "resource");
      a.subresource = Str(ra, "subresource");
      a.namespace_ = Str(ra, "namespace");
      a.name = Str(ra, "name");
    } else {
      a.is_resource_request = false;
      a.verb = Str(nra, "verb");
      a.path = Str(nra, "path");
    }
    Decision d = authorizer_->Authorize(a);
    status["allowed"] = d.allowed;
    // A denial carries no reason (RBAC has no opinion and nothing else decides).
    if (d.allowed && !d.reason.empty()) status["reason"] = d.reason;
  }
  out["spec"] = spec;
  if (ri.namespaced) out["metadata"]["namespace"] = t.ns;
  out["status"] = std::move(status);
  return ApiResult{std::nullopt, std::move(out), 201};
}

}  // namespace gg::sim
