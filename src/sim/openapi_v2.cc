// The /openapi/v2 document: v3 -> Swagger 2.0 conversion, CRD schemas as published in v2,
// the hand-written gnostic protobuf encoder, and the cache (see openapi_v2.h).
#include "sim/openapi_v2.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "sim/protobuf.h"

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr std::string_view kV3Prefix = "#/components/schemas/";
constexpr std::string_view kV2Prefix = "#/definitions/";
constexpr const char* kObjectMetaRef =
    "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

std::string V2Ref(const std::string& ref) {
  if (ref.rfind(kV3Prefix, 0) != 0) return ref;
  return std::string(kV2Prefix) + ref.substr(kV3Prefix.size());
}

bool IsRefOnly(const json& s) { return s.is_object() && s.size() == 1 && s.contains("$ref"); }

}  // namespace

json SchemaV3ToV2(const json& schema) {
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (const auto& [k, v] : schema.items()) {
    if (k == "oneOf" || k == "anyOf" || k == "not" || k == "nullable") continue;
    if (k == "$ref" && v.is_string()) {
      out[k] = V2Ref(v.get<std::string>());
    } else if (k == "allOf" && v.is_array() && v.size() == 1 && IsRefOnly(v[0])) {
      // v3 wraps a $ref in allOf to give it siblings (description, default); v2 has them
      // beside the $ref.
      out["$ref"] = V2Ref(v[0]["$ref"].get<std::string>());
    } else if (k == "allOf" && v.is_array()) {
      json all = json::array();
      for (const auto& s : v) all.push_back(SchemaV3ToV2(s));
      out[k] = std::move(all);
    } else if (k == "properties" && v.is_object()) {
      json props = json::object();
      for (const auto& [p, s] : v.items()) props[p] = SchemaV3ToV2(s);
      out[k] = std::move(props);
    } else if ((k == "items" || k == "additionalProperties") && v.is_object()) {
      out[k] = SchemaV3ToV2(v);
    } else {
      out[k] = v;
    }
  }
  return out;
}

namespace {

// A v3 parameter ({name, in, schema: {type...}}) as v2 has it: the schema's keywords beside
// name and in.
json ParameterV3ToV2(const json& p) {
  json out = json::object();
  for (const auto& [k, v] : p.items()) {
    if (k == "schema" && v.is_object()) {
      const json converted = SchemaV3ToV2(v);
      for (const auto& [sk, sv] : converted.items()) out[sk] = sv;
    } else {
      out[k] = v;
    }
  }
  return out;
}

json ParametersV3ToV2(const json& ps) {
  json out = json::array();
  for (const auto& p : ps) out.push_back(ParameterV3ToV2(p));
  return out;
}

// The schema of a v3 `content` map (the JSON one when there is one).
json ContentSchema(const json& content) {
  if (content.contains("application/json"))
    return content["application/json"].value("schema", json());
  for (const auto& [type, media] : content.items())
    if (media.contains("schema")) return media["schema"];
  return json();
}

void AddMediaTypes(const json& content, std::set<std::string>& out) {
  for (const auto& [type, media] : content.items()) out.insert(type);
}

json OperationV3ToV2(const json& op) {
  json out = json::object();
  std::set<std::string> produces;
  for (const auto& [k, v] : op.items()) {
    if (k == "parameters") {
      out[k] = ParametersV3ToV2(v);
    } else if (k == "requestBody") {
      json content = v.value("content", json::object());
      json body = {{"name", "body"}, {"in", "body"}, {"required", v.value("required", false)}};
      json schema = ContentSchema(content);
      if (!schema.is_null()) body["schema"] = SchemaV3ToV2(schema);
      // The body first, then the query parameters ("parameters" sorts before "requestBody").
      if (!out.contains("parameters")) out["parameters"] = json::array();
      out["parameters"].insert(out["parameters"].begin(), std::move(body));
      std::set<std::string> consumes;
      AddMediaTypes(content, consumes);
      out["consumes"] = consumes;
    } else if (k == "responses") {
      json responses = json::object();
      for (const auto& [code, r] : v.items()) {
        json rv = {{"description", r.value("description", "")}};
        json content = r.value("content", json::object());
        json schema = ContentSchema(content);
        if (!schema.is_null()) rv["schema"] = SchemaV3ToV2(schema);
        AddMediaTypes(content, produces);
        responses[code] = std::move(rv);
      }
      out[k] = std::move(responses);
    } else {
      out[k] = v;
    }
  }
  if (!produces.empty()) out["produces"] = produces;
  out["schemes"] = json::array({"https"});
  return out;
}

}  // namespace

void AddV3DocumentToV2(const json& v3, json& v2) {
  json& defs = v2["definitions"];
  if (v3.contains("components") && v3["components"].contains("schemas"))
    for (const auto& [name, s] : v3["components"]["schemas"].items())
      if (!defs.contains(name)) defs[name] = SchemaV3ToV2(s);
  json& paths = v2["paths"];
  static const json kNone = json::object();
  const json& v3_paths = v3.contains("paths") ? v3["paths"] : kNone;
  for (const auto& [path, item] : v3_paths.items()) {
    json out = json::object();
    for (const auto& [k, v] : item.items()) {
      if (k == "parameters") {
        out[k] = ParametersV3ToV2(v);
      } else if (k == "get" || k == "put" || k == "post" || k == "delete" || k == "patch" ||
                 k == "head" || k == "options") {
        out[k] = OperationV3ToV2(v);
      } else if (k.rfind("x-", 0) == 0) {
        out[k] = v;
      }
    }
    paths[path] = std::move(out);
  }
}

json NewV2Document(std::string_view kube_version) {
  return {{"swagger", "2.0"},
          {"info", {{"title", "Kubernetes"}, {"version", "v" + std::string(kube_version) + ".0"}}},
          {"paths", json::object()},
          {"definitions", json::object()},
          {"securityDefinitions",
           {{"BearerToken",
             {{"type", "apiKey"},
              {"name", "authorization"},
              {"in", "header"},
              {"description", "Bearer Token authentication"}}}}},
          {"security", json::array({{{"BearerToken", json::array()}}})}};
}

// ---- custom resources ----

namespace {

bool IsTrue(const json& s, const char* key) {
  return s.is_object() && s.contains(key) && s[key].is_boolean() && s[key].get<bool>();
}

// ToStructuralOpenAPIV2's rules on one schema node, then on its children (parent first:
// a node's `required` is filtered by its children's nullable before they are rewritten).
void StripForV2(json& s) {
  if (!s.is_object()) return;
  for (const char* k : {"allOf", "oneOf", "anyOf", "not"}) s.erase(k);
  if (s.contains("properties") && s["properties"].is_object() && s.contains("required") &&
      s["required"].is_array()) {
    json kept = json::array();
    for (const auto& r : s["required"])
      if (!(r.is_string() &&
            IsTrue(s["properties"].value(r.get<std::string>(), json()), "nullable")))
        kept.push_back(r);
    if (kept.empty())
      s.erase("required");
    else
      s["required"] = std::move(kept);
  }
  if (s.contains("additionalProperties") && IsTrue(s["additionalProperties"], "nullable"))
    s.erase("required");
  if (IsTrue(s, "nullable")) {
    for (const char* k : {"type", "items", "properties"}) s.erase(k);
  }
  s.erase("nullable");
  if (IsTrue(s, "x-kubernetes-preserve-unknown-fields")) {
    s.erase("items");
    s.erase("properties");
  }
  if (!s.contains("items") && s.value("type", "") == "array") s.erase("type");
  if (IsTrue(s, "x-kubernetes-preserve-unknown-fields") && s.value("type", "") == "object")
    s.erase("type");
  if (s.contains("properties") && s["properties"].is_object())
    for (auto& [p, sub] : s["properties"].items()) StripForV2(sub);
  if (s.contains("items")) StripForV2(s["items"]);
  if (s.contains("additionalProperties")) StripForV2(s["additionalProperties"]);
}

json StringProperty(const char* description) {
  return {{"type", "string"}, {"description", description}};
}

json MetadataProperty() {
  return {{"$ref", kObjectMetaRef}, {"description", "Standard object's metadata."}};
}

// Embedded resources (x-kubernetes-embedded-resource) get apiVersion, kind and metadata,
// kind and apiVersion required — unless they preserve unknown fields.
void AddEmbeddedProperties(json& s) {
  if (!s.is_object()) return;
  if (s.contains("properties") && s["properties"].is_object())
    for (auto& [p, sub] : s["properties"].items()) AddEmbeddedProperties(sub);
  if (s.contains("items")) AddEmbeddedProperties(s["items"]);
  if (s.contains("additionalProperties")) AddEmbeddedProperties(s["additionalProperties"]);
  if (IsTrue(s, "x-kubernetes-preserve-unknown-fields") ||
      !IsTrue(s, "x-kubernetes-embedded-resource"))
    return;
  s["properties"]["apiVersion"] = StringProperty(
      "apiVersion defines the versioned schema of this representation of an object.");
  s["properties"]["kind"] =
      StringProperty("kind is a string value representing the type of this object. In CamelCase.");
  s["properties"]["metadata"] = MetadataProperty();
  if (!s.contains("required") || !s["required"].is_array()) s["required"] = json::array();
  for (const char* r : {"kind", "apiVersion"})
    if (std::find(s["required"].begin(), s["required"].end(), r) == s["required"].end())
      s["required"].push_back(r);
}

}  // namespace

json CrdSchemaV2(const json& structural, const std::string& group, const std::string& version,
                 const std::string& kind) {
  json s;
  if (!structural.is_object() || IsTrue(structural, "x-kubernetes-preserve-unknown-fields")) {
    // kubectl would take declared properties as the only ones allowed: nothing is declared.
    s = {{"type", "object"}};
  } else {
    s = structural;
    StripForV2(s);
    s["properties"]["metadata"] = MetadataProperty();
    s["properties"]["apiVersion"] = StringProperty(
        "APIVersion defines the versioned schema of this representation of an object. Servers "
        "should convert recognized schemas to the latest internal value, and may reject "
        "unrecognized values.");
    s["properties"]["kind"] = StringProperty(
        "Kind is a string value representing the REST resource this object represents. Servers "
        "may infer this from the endpoint the client submits requests to. Cannot be updated. In "
        "CamelCase.");
    AddEmbeddedProperties(s);
  }
  s["x-kubernetes-group-version-kind"] =
      json::array({{{"group", group}, {"kind", kind}, {"version", version}}});
  return s;
}

// ---- protobuf (gnostic openapi.v2) ----

namespace {

// The Named* messages of gnostic's maps: {name = 1, value = 2}, as field `field` of `w`.
void WriteNamed(ProtobufWriter& w, int field, std::string_view name, std::string_view value) {
  ProtobufWriter named;
  named.Bytes(1, name);
  named.Bytes(2, value);
  w.Bytes(field, named.data());
}

using Fields = std::initializer_list<std::pair<const char*, int>>;

bool IsExtension(const std::string& k) { return k.rfind("x-", 0) == 0; }

Status UnknownKey(std::string_view where, const std::string& key) {
  return InvalidArgumentError("OpenAPI v2 " + std::string(where) + " has no \"" + key + "\"");
}

// openapi.v2.Any: the value as YAML text (JSON is YAML), as gnostic keeps it.
std::string AnyBytes(const json& v) {
  ProtobufWriter w;
  w.Bytes(2, v.dump());
  return w.Take();
}

// NamedAny{name=1, value=2}: a vendor extension.
void WriteExtension(ProtobufWriter& w, int field, const std::string& name, const json& v) {
  WriteNamed(w, field, name, AnyBytes(v));
}

void WriteString(ProtobufWriter& w, int field, const json& v) {
  if (v.is_string() && !v.get_ref<const std::string&>().empty())
    w.Bytes(field, v.get<std::string>());
}

void WriteStrings(ProtobufWriter& w, int field, const json& v) {
  if (v.is_string()) WriteString(w, field, v);
  if (!v.is_array()) return;
  for (const auto& s : v)
    if (s.is_string()) w.Bytes(field, s.get<std::string>());
}

void WriteBool(ProtobufWriter& w, int field, const json& v) {
  if (v.is_boolean() && v.get<bool>()) w.Bool(field, true);
}

void WriteInt(ProtobufWriter& w, int field, const json& v) {
  if (v.is_number_integer() && v.get<std::int64_t>() != 0)
    w.Varint(field, static_cast<std::uint64_t>(v.get<std::int64_t>()));
}

void WriteDouble(ProtobufWriter& w, int field, const json& v) {
  if (v.is_number() && v.get<double>() != 0) w.Double(field, v.get<double>());
}

// Scalar keywords by kind: string, bool, int64, double, Any, repeated Any, repeated string.
// Returns false when `k` is none of them.
bool WriteScalarKeyword(ProtobufWriter& w, const std::string& k, const json& v, Fields strings,
                        Fields bools, Fields ints, Fields doubles, Fields anys) {
  auto find = [&k](Fields fs) {
    for (const auto& [name, num] : fs)
      if (k == name) return num;
    return 0;
  };
  if (int f = find(strings)) {
    WriteString(w, f, v);
  } else if (int f = find(bools)) {
    WriteBool(w, f, v);
  } else if (int f = find(ints)) {
    WriteInt(w, f, v);
  } else if (int f = find(doubles)) {
    WriteDouble(w, f, v);
  } else if (int f = find(anys)) {
    if (k == "enum" && v.is_array()) {
      for (const auto& e : v) w.Bytes(f, AnyBytes(e));
    } else {
      w.Bytes(f, AnyBytes(v));
    }
  } else {
    return false;
  }
  return true;
}

StatusOr<std::string> EncodeSchema(const json& s);

// The keywords of a Schema that hold other schemas.
Status WriteSchemaChildren(ProtobufWriter& w, const std::string& k, const json& v) {
  if (k == "properties" && v.is_object()) {
    ProtobufWriter props;
    for (const auto& [name, sub] : v.items()) {
      auto enc = EncodeSchema(sub);
      if (!enc.ok()) return enc.status();
      WriteNamed(props, 1, name, *enc);
    }
    w.Bytes(25, props.data());
  } else if (k == "additionalProperties") {
    ProtobufWriter item;  // oneof: schema = 1, boolean = 2 (written even when false)
    if (v.is_boolean()) {
      item.Bool(2, v.get<bool>());
    } else {
      auto enc = EncodeSchema(v);
      if (!enc.ok()) return enc.status();
      item.Bytes(1, *enc);
    }
    w.Bytes(21, item.data());
  } else if (k == "items" || k == "allOf") {
    ProtobufWriter items;
    json list = v.is_array() ? v : json::array({v});
    for (const auto& sub : list) {
      auto enc = EncodeSchema(sub);
      if (!enc.ok()) return enc.status();
      (k == "items" ? items : w).Bytes(k == "items" ? 1 : 24, *enc);
    }
    if (k == "items") w.Bytes(23, items.data());
  } else if (k == "type") {
    ProtobufWriter type;
    WriteStrings(type, 1, v);
    w.Bytes(22, type.data());
  } else if (k == "externalDocs" && v.is_object()) {
    ProtobufWriter docs;
    WriteString(docs, 1, v.value("description", json()));
    WriteString(docs, 2, v.value("url", json()));
    w.Bytes(29, docs.data());
  } else {
    return UnknownKey("schema", k);
  }
  return OkStatus();
}

StatusOr<std::string> EncodeSchema(const json& s) {
  ProtobufWriter w;
  if (!s.is_object()) return InvalidArgumentError("OpenAPI v2 schema is not an object");
  for (const auto& [k, v] : s.items()) {
    if (IsExtension(k)) continue;
    if (k == "required") {
      WriteStrings(w, 19, v);
      continue;
    }
    if (WriteScalarKeyword(w, k, v,
                           {{"$ref", 1},
                            {"format", 2},
                            {"title", 3},
                            {"description", 4},
                            {"pattern", 13},
                            {"discriminator", 26}},
                           {{"exclusiveMaximum", 8},
                            {"exclusiveMinimum", 10},
                            {"uniqueItems", 16},
                            {"readOnly", 27}},
                           {{"maxLength", 11},
                            {"minLength", 12},
                            {"maxItems", 14},
                            {"minItems", 15},
                            {"maxProperties", 17},
                            {"minProperties", 18}},
                           {{"multipleOf", 6}, {"maximum", 7}, {"minimum", 9}},
                           {{"default", 5}, {"enum", 20}, {"example", 30}}))
      continue;
    Status st = WriteSchemaChildren(w, k, v);
    if (!st.ok()) return st;
  }
  for (const auto& [k, v] : s.items())
    if (IsExtension(k)) WriteExtension(w, 31, k, v);
  return w.Take();
}

// A non-body parameter's sub-schema: header and path number their fields from 5 after name,
// query and formData from 6 (allowEmptyValue takes 5).
StatusOr<std::string> EncodeNonBodyParameter(const json& p, int* oneof_field) {
  std::string in = p.value("in", "");
  static const std::map<std::string, int> kOneof = {
      {"header", 1}, {"formData", 2}, {"query", 3}, {"path", 4}};
  auto it = kOneof.find(in);
  if (it == kOneof.end()) return InvalidArgumentError("OpenAPI v2 parameter in \"" + in + "\"");
  *oneof_field = it->second;
  const int b = (in == "query" || in == "formData") ? 6 : 5;
  ProtobufWriter w;
  for (const auto& [k, v] : p.items()) {
    if (IsExtension(k)) continue;
    if (k == "allowEmptyValue" && b == 6) {
      WriteBool(w, 5, v);
    } else if (k == "items" && v.is_object()) {
      ProtobufWriter items;  // PrimitivesItems: type = 1, format = 2
      WriteString(items, 1, v.value("type", json()));
      WriteString(items, 2, v.value("format", json()));
      w.Bytes(b + 2, items.data());
    } else if (!WriteScalarKeyword(w, k, v,
                                   {{"in", 2},
                                    {"description", 3},
                                    {"name", 4},
                                    {"type", b},
                                    {"format", b + 1},
                                    {"collectionFormat", b + 3},
                                    {"pattern", b + 11}},
                                   {{"required", 1},
                                    {"exclusiveMaximum", b + 6},
                                    {"exclusiveMinimum", b + 8},
                                    {"uniqueItems", b + 14}},
                                   {{"maxLength", b + 9},
                                    {"minLength", b + 10},
                                    {"maxItems", b + 12},
                                    {"minItems", b + 13}},
                                   {{"maximum", b + 5}, {"minimum", b + 7}, {"multipleOf", b + 16}},
                                   {{"default", b + 4}, {"enum", b + 15}})) {
      return UnknownKey("parameter", k);
    }
  }
  for (const auto& [k, v] : p.items())
    if (IsExtension(k)) WriteExtension(w, b + 17, k, v);
  return w.Take();
}

// ParametersItem{parameter = 1: Parameter{body_parameter = 1 | non_body_parameter = 2}}.
StatusOr<std::string> EncodeParameter(const json& p) {
  ProtobufWriter param;
  if (p.value("in", "") == "body") {
    ProtobufWriter body;
    WriteString(body, 1, p.value("description", json()));
    WriteString(body, 2, p.value("name", json()));
    WriteString(body, 3, p.value("in", json()));
    WriteBool(body, 4, p.value("required", json()));
    if (p.contains("schema")) {
      auto enc = EncodeSchema(p["schema"]);
      if (!enc.ok()) return enc.status();
      body.Bytes(5, *enc);
    }
    param.Bytes(1, body.data());
  } else {
    int oneof = 0;
    auto enc = EncodeNonBodyParameter(p, &oneof);
    if (!enc.ok()) return enc.status();
    ProtobufWriter non_body;
    non_body.Bytes(oneof, *enc);
    param.Bytes(2, non_body.data());
  }
  ProtobufWriter item;
  item.Bytes(1, param.data());
  return item.Take();
}

Status WriteParameters(ProtobufWriter& w, int field, const json& ps) {
  for (const auto& p : ps) {
    auto enc = EncodeParameter(p);
    if (!enc.ok()) return enc.status();
    w.Bytes(field, *enc);
  }
  return OkStatus();
}

// Responses{response_code = 1: NamedResponseValue{name, ResponseValue{response = 1}}}.
StatusOr<std::string> EncodeResponses(const json& rs) {
  ProtobufWriter w;
  for (const auto& [code, r] : rs.items()) {
    if (IsExtension(code)) continue;
    ProtobufWriter resp;
    WriteString(resp, 1, r.value("description", json()));
    if (r.contains("schema")) {
      auto enc = EncodeSchema(r["schema"]);
      if (!enc.ok()) return enc.status();
      ProtobufWriter item;  // SchemaItem{schema = 1}
      item.Bytes(1, *enc);
      resp.Bytes(2, item.data());
    }
    ProtobufWriter value;
    value.Bytes(1, resp.data());
    WriteNamed(w, 1, code, value.data());
  }
  for (const auto& [k, v] : rs.items())
    if (IsExtension(k)) WriteExtension(w, 2, k, v);
  return w.Take();
}

StatusOr<std::string> EncodeOperation(const json& op) {
  ProtobufWriter w;
  for (const auto& [k, v] : op.items()) {
    Status st = OkStatus();
    if (IsExtension(k)) continue;
    if (k == "tags" || k == "produces" || k == "consumes" || k == "schemes") {
      static const std::map<std::string, int> kLists = {
          {"tags", 1}, {"produces", 6}, {"consumes", 7}, {"schemes", 10}};
      WriteStrings(w, kLists.at(k), v);
    } else if (k == "parameters") {
      st = WriteParameters(w, 8, v);
    } else if (k == "responses") {
      auto enc = EncodeResponses(v);
      if (!enc.ok()) return enc.status();
      w.Bytes(9, *enc);
    } else if (!WriteScalarKeyword(w, k, v,
                                   {{"summary", 2}, {"description", 3}, {"operationId", 5}},
                                   {{"deprecated", 11}}, {}, {}, {})) {
      return UnknownKey("operation", k);
    }
    if (!st.ok()) return st;
  }
  for (const auto& [k, v] : op.items())
    if (IsExtension(k)) WriteExtension(w, 13, k, v);
  return w.Take();
}

StatusOr<std::string> EncodePathItem(const json& item) {
  static const std::map<std::string, int> kOps = {{"get", 2},    {"put", 3},     {"post", 4},
                                                  {"delete", 5}, {"options", 6}, {"head", 7},
                                                  {"patch", 8}};
  ProtobufWriter w;
  for (const auto& [k, v] : item.items()) {
    if (IsExtension(k)) continue;
    if (auto it = kOps.find(k); it != kOps.end()) {
      auto enc = EncodeOperation(v);
      if (!enc.ok()) return enc.status();
      w.Bytes(it->second, *enc);
    } else if (k == "parameters") {
      Status st = WriteParameters(w, 9, v);
      if (!st.ok()) return st;
    } else if (k == "$ref") {
      WriteString(w, 1, v);
    } else {
      return UnknownKey("path item", k);
    }
  }
  for (const auto& [k, v] : item.items())
    if (IsExtension(k)) WriteExtension(w, 10, k, v);
  return w.Take();
}

// securityDefinitions (api keys only, the one kind Kubernetes declares) and security.
std::string EncodeSecurityDefinitions(const json& defs) {
  ProtobufWriter w;
  for (const auto& [name, d] : defs.items()) {
    ProtobufWriter key;  // ApiKeySecurity: type, name, in, description
    WriteString(key, 1, d.value("type", json()));
    WriteString(key, 2, d.value("name", json()));
    WriteString(key, 3, d.value("in", json()));
    WriteString(key, 4, d.value("description", json()));
    ProtobufWriter item;
    item.Bytes(2, key.data());  // SecurityDefinitionsItem oneof api_key_security = 2
    WriteNamed(w, 1, name, item.data());
  }
  return w.Take();
}

std::string EncodeSecurityRequirement(const json& req) {
  ProtobufWriter w;
  for (const auto& [name, scopes] : req.items()) {
    ProtobufWriter array;
    WriteStrings(array, 1, scopes);
    WriteNamed(w, 1, name, array.data());
  }
  return w.Take();
}

// Each entry of the object v2[key] encoded by `encode`, as a Named* message; an error names
// the entry.
Status WriteNamedMap(ProtobufWriter& w, int field, const json& v2, const char* key,
                     StatusOr<std::string> (*encode)(const json&)) {
  if (!v2.contains(key)) return OkStatus();
  for (const auto& [name, value] : v2[key].items()) {
    auto enc = encode(value);
    if (!enc.ok()) return Status(enc.status().code(), name + ": " + enc.status().message());
    WriteNamed(w, field, name, *enc);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> EncodeOpenApiV2Protobuf(const json& v2) {
  ProtobufWriter w;
  WriteString(w, 1, v2.value("swagger", json()));
  if (v2.contains("info")) {
    ProtobufWriter info;
    WriteString(info, 1, v2["info"].value("title", json()));
    WriteString(info, 2, v2["info"].value("version", json()));
    WriteString(info, 3, v2["info"].value("description", json()));
    w.Bytes(2, info.data());
  }
  ProtobufWriter paths, defs;  // Paths{path = 2}, Definitions{additional_properties = 1}
  Status st = WriteNamedMap(paths, 2, v2, "paths", EncodePathItem);
  if (st.ok()) st = WriteNamedMap(defs, 1, v2, "definitions", EncodeSchema);
  if (!st.ok()) return st;
  w.Bytes(8, paths.data());
  w.Bytes(9, defs.data());
  if (v2.contains("security"))
    for (const auto& req : v2["security"]) w.Bytes(12, EncodeSecurityRequirement(req));
  if (v2.contains("securityDefinitions"))
    w.Bytes(13, EncodeSecurityDefinitions(v2["securityDefinitions"]));
  return w.Take();
}

// ---- serving ----

namespace {

std::string Sha512Hex(const std::string& data) {
  unsigned char md[SHA512_DIGEST_LENGTH];
  SHA512(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  std::string out;
  char buf[3];
  for (unsigned char c : md) {
    std::snprintf(buf, sizeof buf, "%02X", c);
    out += buf;
  }
  return out;
}

}  // namespace

StatusOr<std::shared_ptr<const OpenApiV2Served>> OpenApiV2Cache::Get(
    const std::function<json()>& builtin, const json& custom) {
  std::string key = custom.dump();
  std::scoped_lock lock(mu_);
  if (served_ && key == custom_key_) return served_;
  // The built-in part is rebuilt rather than kept: as a parsed tree it would hold ~40 MB for
  // the process's life, and CRD sets change seldom (~0.35 s a rebuild).
  json doc = builtin();
  for (const char* part : {"definitions", "paths"})
    if (custom.contains(part))
      for (const auto& [k, v] : custom[part].items()) doc[part][k] = v;
  auto served = std::make_shared<OpenApiV2Served>();
  served->json = doc.dump();
  auto pb = EncodeOpenApiV2Protobuf(doc);
  if (!pb.ok()) return pb.status();
  served->protobuf = std::move(*pb);
  served->etag = "\"" + Sha512Hex(served->json) + "\"";
  served_ = std::move(served);
  custom_key_ = std::move(key);
  return served_;
}

std::string OpenApiV2Format(std::string_view accept) {
  struct Clause {
    std::string type;
    double q = 1;
    int order = 0;
  };
  std::vector<Clause> clauses;
  std::string a(accept.empty() ? "*/*" : accept);
  std::size_t pos = 0;
  for (int order = 0; pos <= a.size(); ++order) {
    std::size_t comma = a.find(',', pos);
    std::string part = a.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? a.size() + 1 : comma + 1;
    Clause c;
    c.order = order;
    std::size_t semi = part.find(';');
    c.type = part.substr(0, semi);
    c.type.erase(0, c.type.find_first_not_of(" \t"));
    c.type.erase(c.type.find_last_not_of(" \t") + 1);
    if (semi != std::string::npos) {
      std::size_t qp = part.find("q=", semi);
      if (qp != std::string::npos) c.q = std::atof(part.c_str() + qp + 2);
    }
    if (c.q > 0) clauses.push_back(c);
  }
  // As goautoneg orders them: by q, then a concrete type before a wildcard one.
  auto wild = [](const Clause& c) {
    return (c.type.rfind("*/", 0) == 0 ? 2 : 0) +
           (c.type.size() >= 2 && c.type.ends_with("/*") ? 1 : 0);
  };
  std::stable_sort(clauses.begin(), clauses.end(), [&wild](const Clause& x, const Clause& y) {
    return x.q != y.q ? x.q > y.q : wild(x) < wild(y);
  });
  for (const auto& c : clauses) {
    if (c.type == "*/*" || c.type == "application/*" || c.type == "application/json") return "json";
    if (c.type == "application/com.github.proto-openapi.spec.v2@v1.0+protobuf" ||
        c.type == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
      return "protobuf";
  }
  return "";
}

}  // namespace gg::sim
