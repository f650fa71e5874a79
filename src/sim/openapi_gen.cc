// OpenAPI v3 generation for CRD group versions.
#include "sim/openapi_gen.h"

#include <map>
#include <set>
#include <string>

#include "sim/openapi_v2.h"
#include "sim/registry.h"
#include "sim/schema.h"

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr const char* kRefPrefix = "#/components/schemas/";
constexpr const char* kObjectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
constexpr const char* kListMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

json Ref(const std::string& name) { return {{"$ref", std::string(kRefPrefix) + name}}; }

json Param(const char* name, const char* in, const char* type, bool required,
           const char* description) {
  json p = {{"name", name},
            {"in", in},
            {"description", description},
            {"schema", {{"type", type}, {"uniqueItems", true}}}};
  if (required) p["required"] = true;
  return p;
}

json Op(const std::string& action, const std::string& id, const ResourceInfo& ri,
        const std::string& response_schema, bool with_body) {
  json content = {{"application/json", {{"schema", Ref(response_schema)}}},
                  {"application/yaml", {{"schema", Ref(response_schema)}}}};
  json op = {{"operationId", id},
             {"tags", {ri.group + "_" + ri.version}},
             {"x-kubernetes-action", action},
             {"x-kubernetes-group-version-kind",
              {{"group", ri.group}, {"version", ri.version}, {"kind", ri.kind}}},
             {"responses", {{"200", {{"description", "OK"}, {"content", content}}}}}};
  if (with_body) {
    json params = json::array(
        {Param("dryRun", "query", "string", false,
               "When present, indicates that modifications should not be persisted."),
         Param("fieldManager", "query", "string", false,
               "fieldManager is a name associated with the actor or entity that is making these "
               "changes."),
         Param("fieldValidation", "query", "string", false,
               "fieldValidation instructs the server on how to handle objects in the request "
               "(POST/PUT/PATCH) containing unknown or duplicate fields.")});
    if (action == "patch") {
      params.push_back(
          Param("force", "query", "boolean", false, "Force is going to \"force\" Apply requests."));
      json patch_schema = Ref("io.k8s.apimachinery.pkg.apis.meta.v1.Patch");
      op["requestBody"] = {{"required", true},
                           {"content",
                            {{"application/apply-patch+yaml", {{"schema", patch_schema}}},
                             {"application/json-patch+json", {{"schema", patch_schema}}},
                             {"application/merge-patch+json", {{"schema", patch_schema}}}}}};
    } else {
      op["requestBody"] = {{"required", true},
                           {"content",
                            {{"application/json", {{"schema", Ref(response_schema)}}},
                             {"application/yaml", {{"schema", Ref(response_schema)}}}}}};
    }
    op["parameters"] = std::move(params);
  }
  return op;
}

void CollectRefs(const json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "$ref" && v.is_string()) {
        std::string r = v.get<std::string>();
        if (r.rfind(kRefPrefix, 0) == 0) out.insert(r.substr(std::string(kRefPrefix).size()));
      } else {
        CollectRefs(v, out);
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) CollectRefs(v, out);
  }
}

// The CRD schema as the server publishes it: apiVersion/kind/metadata described, metadata a
// reference to ObjectMeta, the GVK extension set.
json PublishedSchema(const ResourceInfo& ri) {
  json s = ri.schema.is_object()
               ? ri.schema
               : json{{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  if (!s.contains("properties") || !s["properties"].is_object()) s["properties"] = json::object();
  auto& props = s["properties"];
  props["apiVersion"] = {
      {"type", "string"},
      {"description",
       "APIVersion defines the versioned schema of this representation of an object. Servers "
       "should convert recognized schemas to the latest internal value, and may reject "
       "unrecognized values."}};
  props["kind"] = {{"type", "string"},
                   {"description",
                    "Kind is a string value representing the REST resource this object "
                    "represents. Servers may infer this from the endpoint the client submits "
                    "requests to. Cannot be updated. In CamelCase."}};
  props["metadata"] = {{"allOf", json::array({Ref(kObjectMeta)})},
                       {"description", "Standard object's metadata."}};
  s["x-kubernetes-group-version-kind"] =
      json::array({{{"group", ri.group}, {"kind", ri.kind}, {"version", ri.version}}});
  return s;
}

}  // namespace

std::string CrdSchemaName(std::string_view group, std::string_view version, std::string_view kind) {
  // Reverse the DNS labels of the group: gpuguardian.io -> io.gpuguardian.
  std::vector<std::string> labels;
  std::string cur;
  for (char c : group) {
    if (c == '.') {
      labels.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  labels.push_back(cur);
  std::string out;
  for (auto it = labels.rbegin(); it != labels.rend(); ++it) out += *it + ".";
  return out + std::string(version) + "." + std::string(kind);
}

namespace {

// The list kind's schema: items of the kind's schema `name`, list metadata.
json ListSchema(const ResourceInfo& ri, const std::string& name) {
  return {{"type", "object"},
          {"description", ri.list_kind + " is a list of " + ri.kind},
          {"required", {"items"}},
          {"properties",
           {{"apiVersion", {{"type", "string"}}},
            {"kind", {{"type", "string"}}},
            {"items", {{"type", "array"}, {"items", Ref(name)}}},
            {"metadata", {{"allOf", json::array({Ref(kListMeta)})}}}}},
          {"x-kubernetes-group-version-kind",
           json::array({{{"group", ri.group}, {"kind", ri.list_kind}, {"version", ri.version}}})}};
}

// The paths of one custom resource: its collection (and, namespaced, across namespaces), an
// object, and its status when status is a subresource.
void AddCrdPaths(const ResourceInfo& ri, const std::string& name, const std::string& list_name,
                 json& paths) {
  std::string base = "/apis/" + ri.group + "/" + ri.version + "/";
  std::string coll = base + (ri.namespaced ? "namespaces/{namespace}/" : "") + ri.resource;
  json scope_params = json::array();
  if (ri.namespaced)
    scope_params.push_back(Param("namespace", "path", "string", true,
                                 "object name and auth scope, such as for teams and projects"));
  json pretty =
      Param("pretty", "query", "string", false, "If 'true', then the output is pretty printed.");
  const std::string& id_kind = ri.kind;
  json cparams = scope_params;
  cparams.push_back(pretty);
  paths[coll] = {{"parameters", cparams},
                 {"get", Op("list", "list" + id_kind, ri, list_name, false)},
                 {"post", Op("post", "create" + id_kind, ri, name, true)}};
  if (ri.namespaced)
    paths[base + ri.resource] = {
        {"parameters", json::array({pretty})},
        {"get", Op("list", "list" + id_kind + "ForAllNamespaces", ri, list_name, false)}};
  json oparams = scope_params;
  oparams.push_back(Param("name", "path", "string", true, ("name of the " + ri.kind).c_str()));
  oparams.push_back(pretty);
  // Path-level too: client-side checks of query-parameter support read either level.
  json oparams_w = oparams;
  oparams_w.push_back(Param("fieldValidation", "query", "string", false,
                            "fieldValidation instructs the server on how to handle objects in "
                            "the request containing unknown or duplicate fields."));
  paths[coll + "/{name}"] = {{"parameters", oparams_w},
                             {"get", Op("get", "read" + id_kind, ri, name, false)},
                             {"put", Op("put", "replace" + id_kind, ri, name, true)},
                             {"patch", Op("patch", "patch" + id_kind, ri, name, true)},
                             {"delete", Op("delete", "delete" + id_kind, ri, name, false)}};
  if (ri.status_subresource)
    paths[coll + "/{name}/status"] = {
        {"parameters", oparams_w},
        {"get", Op("get", "read" + id_kind + "Status", ri, name, false)},
        {"put", Op("put", "replace" + id_kind + "Status", ri, name, true)},
        {"patch", Op("patch", "patch" + id_kind + "Status", ri, name, true)}};
}

// The meta.k8s.io schemas referenced, transitively, from the built-in documents.
void AddReferencedSchemas(const SchemaSet& builtin, const json& paths, json& schemas) {
  std::set<std::string> want, done;
  CollectRefs(schemas, want);
  CollectRefs(paths, want);
  while (!want.empty()) {
    std::string n = *want.begin();
    want.erase(want.begin());
    if (!done.insert(n).second || schemas.contains(n)) continue;
    const json* s = builtin.Find(n);
    if (!s) continue;
    schemas[n] = *s;
    std::set<std::string> more;
    CollectRefs(*s, more);
    for (const auto& m : more)
      if (!done.count(m)) want.insert(m);
  }
}

}  // namespace

json CrdOpenApiDocument(const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
                        const SchemaSet* builtin) {
  json schemas = json::object();
  json paths = json::object();
  for (const auto& rp : resources) {
    const ResourceInfo& ri = *rp;
    std::string name = CrdSchemaName(ri.group, ri.version, ri.kind);
    std::string list_name = name.substr(0, name.size() - ri.kind.size()) + ri.list_kind;
    schemas[name] = PublishedSchema(ri);
    schemas[list_name] = ListSchema(ri, name);
    AddCrdPaths(ri, name, list_name, paths);
  }
  if (builtin) AddReferencedSchemas(*builtin, paths, schemas);
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "Kubernetes CRD Swagger"}, {"version", "v0.1.0"}}},
          {"paths", std::move(paths)},
          {"components", {{"schemas", std::move(schemas)}}}};
}
json CrdOpenApiV2Part(const std::vector<std::shared_ptr<const ResourceInfo>>& resources,
                      const SchemaSet* builtin) {
  std::map<std::string, std::vector<std::shared_ptr<const ResourceInfo>>> by_gv;
  for (const auto& r : resources) by_gv[r->group + "/" + r->version].push_back(r);
  json out = {{"definitions", json::object()}, {"paths", json::object()}};
  for (const auto& [gv, rs] : by_gv) {
    AddV3DocumentToV2(CrdOpenApiDocument(rs, builtin), out);
    for (const auto& ri : rs)
      out["definitions"][CrdSchemaName(ri->group, ri->version, ri->kind)] =
          CrdSchemaV2(ri->schema, ri->group, ri->version, ri->kind);
  }
  return out;
}

}  // namespace gg::sim
