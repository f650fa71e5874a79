// The scale subresource of Deployments and ReplicaSets: an autoscaling/v1 Scale whose
// spec.replicas is the parent's, status.replicas and status.selector (the label selector as a
// string) from the parent's status and spec. Writes change only the parent's spec.replicas.
#include "sim/api.h"
#include "sim/api_util.h"
#include "sim/patch.h"

namespace gg::sim {

using nlohmann::json;

namespace {

// metav1.FormatLabelSelector: matchLabels as k=v, then matchExpressions.
std::string SelectorString(const json& sel) {
  std::vector<std::string> parts;
  if (!sel.is_object()) return "";
  const json labels = sel.value("matchLabels", json::object());
  const json exprs = sel.value("matchExpressions", json::array());
  for (const auto& [k, v] : labels.items())
    parts.push_back(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  for (const auto& e : exprs) {
    if (!e.is_object()) continue;
    std::string key = e.value("key", ""), op = e.value("operator", "");
    std::string vals;
    const json values = e.value("values", json::array());
    for (const auto& v : values)
      vals += (vals.empty() ? "" : ",") + (v.is_string() ? v.get<std::string>() : v.dump());
    if (op == "In")
      parts.push_back(key + " in (" + vals + ")");
    else if (op == "NotIn")
      parts.push_back(key + " notin (" + vals + ")");
    else if (op == "Exists")
      parts.push_back(key);
    else if (op == "DoesNotExist")
      parts.push_back("!" + key);
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

json ScaleOf(const json& parent) {
  const json& md = parent["metadata"];
  json smd = json::object();
  for (const char* k : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"})
    if (md.contains(k)) smd[k] = md[k];
  const json spec = parent.value("spec", json::object());
  const json status = parent.value("status", json::object());
  json out = {{"kind", "Scale"}, {"apiVersion", "autoscaling/v1"}, {"metadata", smd}};
  out["spec"] = {{"replicas", spec.value("replicas", 1)}};
  out["status"] = {{"replicas", status.value("replicas", 0)}};
  std::string sel = SelectorString(spec.value("selector", json::object()));
  if (!sel.empty()) out["status"]["selector"] = sel;
  return out;
}

}  // namespace

ApiResult ApiCore::ScaleRequest(const Target& t, const std::string& verb,
                                const std::string& content_type, const json& body,
                                const WriteOpts& o) {
  Target parent = t;
  parent.sub.clear();
  auto cur = Get(parent);
  if (!cur.ok()) return cur;
  json scale = ScaleOf(cur.obj);
  if (verb == "get") return ApiResult{std::nullopt, std::move(scale), 200};
  json want;
  if (verb == "update") {
    want = body;
    if (!want.is_object())
      return ApiResult::Err(BadRequestErr("the body of the request must be a JSON object"));
    const std::string rv = want.contains("metadata") && want["metadata"].is_object()
                               ? want["metadata"].value("resourceVersion", "")
                               : "";
    if (!rv.empty() && rv != scale["metadata"].value("resourceVersion", ""))
      return ApiResult::Err(ConflictErr(t.ri->resource, t.ri->group, t.name));
  } else {
    std::string ct = MediaType(content_type);
    StatusOr<json> next = InvalidArgumentError("unsupported patch type");
    if (ct == "application/json-patch+json")
      next = ApplyJsonPatch(scale, body);
    else if (ct == "application/merge-patch+json" || ct == "application/strategic-merge-patch+json")
      next = ApplyMergePatch(scale, body);
    else
      return ApiResult::Err(UnsupportedMediaTypeErr(ct));
    if (!next.ok()) return ApiResult::Err(BadRequestErr(next.status().message()));
    want = std::move(*next);
  }
  const json& replicas = want.is_object() && want.contains("spec") && want["spec"].is_object() &&
                                 want["spec"].contains("replicas")
                             ? want["spec"]["replicas"]
                             : json();
  if (!replicas.is_number_integer() || replicas.get<long long>() < 0)
    return ApiResult::Err(InvalidErr(
        "Scale", "autoscaling", t.name,
        {{"FieldValueInvalid",
          "Invalid value: " + (replicas.is_null() ? std::string("null") : replicas.dump()) +
              ": must be greater than or equal to 0",
          "spec.replicas"}}));
  auto r =
      Patch(parent, "application/merge-patch+json", json{{"spec", {{"replicas", replicas}}}}, o);
  if (!r.ok()) return r;
  ApiResult out{std::nullopt, ScaleOf(r.obj), 200};
  return out;
}

}  // namespace gg::sim
