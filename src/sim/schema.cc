// OpenAPI v3 structural-schema validation, unknown-field detection and schema loading.
// plus the Go-side validation rules of built-in kinds (ValidateBuiltin, at the end).
#include "sim/schema.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "sim/json_path.h"

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr std::string_view kRefPrefix = "#/components/schemas/";

std::string Child(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}
std::string Index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}
std::string MapKey(std::string_view path, std::string_view key) {
  return std::string(path) + "[" + std::string(key) + "]";
}

std::string TypeName(const json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.is_null() ? "null" : v.type_name();  // string, boolean, array, object
}

bool IsIntegral(const json& v) {
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) &&
         std::floor(v.get<double>()) == v.get<double>();
}

std::string Num(const json& v) {
  if (!v.is_number_float()) return v.dump();
  std::ostringstream os;
  os << v.get<double>();
  return os.str();
}

// Regex cache: patterns come from schemas (trusted-ish, but CRDs are user input).
const std::regex* CompiledPattern(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::regex>> cache;
  std::scoped_lock lock(mu);
  auto it = cache.find(pattern);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<std::regex> re;
  try {
    re = std::make_unique<std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error&) {
    re = nullptr;
  }
  if (cache.size() >= 4096) cache.clear();
  auto* p = re.get();
  cache.emplace(pattern, std::move(re));
  return p;
}

}  // namespace

Status SchemaSet::AddDocument(const json& doc) {
  if (!doc.is_object()) return InvalidArgumentError("OpenAPI document must be an object");
  auto c = doc.find("components");
  if (c == doc.end() || !c->is_object())
    return InvalidArgumentError("OpenAPI document has no components");
  auto s = c->find("schemas");
  if (s == c->end() || !s->is_object())
    return InvalidArgumentError("OpenAPI document has no components.schemas");
  for (auto it = s->begin(); it != s->end(); ++it) schemas_[it.key()] = *it;
  return OkStatus();
}

Status SchemaSet::AddDocumentFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open " + path);
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgumentError("invalid JSON in " + path);
  Status st = AddDocument(doc);
  return st.ok() ? st : st.WithContext(path);
}

void SchemaSet::AddSchema(const std::string& name, json schema) {
  schemas_[name] = std::move(schema);
}

const json* SchemaSet::Find(std::string_view name) const {
  auto it = schemas_.find(name);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::optional<std::string> SchemaSet::NameForGvk(std::string_view group, std::string_view version,
                                                 std::string_view kind) const {
  for (const auto& [name, s] : schemas_) {
    auto g = s.find("x-kubernetes-group-version-kind");
    if (g == s.end() || !g->is_array()) continue;
    for (const auto& e : *g) {
      if (e.is_object() && e.value("group", "") == group && e.value("version", "") == version &&
          e.value("kind", "") == kind)
        return name;
    }
  }
  return std::nullopt;
}

const json* SchemaSet::Resolve(const json& schema) const {
  const json* cur = &schema;
  for (int depth = 0; depth < 16; ++depth) {
    if (!cur->is_object()) return cur;
    if (auto r = cur->find("$ref"); r != cur->end() && r->is_string()) {
      const std::string& ref = r->get_ref<const std::string&>();
      if (ref.rfind(kRefPrefix, 0) != 0) return nullptr;
      cur = Find(std::string_view(ref).substr(kRefPrefix.size()));
      if (!cur) return nullptr;
      continue;
    }
    // The k8s documents wrap refs as {"allOf":[{"$ref":..}], "default":.., "description":..}.
    if (auto a = cur->find("allOf"); a != cur->end() && a->is_array() && a->size() == 1 &&
                                     !cur->contains("type") && !cur->contains("properties")) {
      cur = &(*a)[0];
      continue;
    }
    return cur;
  }
  return nullptr;
}

namespace {

struct Validator {
  const SchemaSet& set;
  SchemaValidation& out;
  int depth = 0;

  void Add(std::string reason, std::string message, std::string field) {
    if (out.causes.size() < 256)
      out.causes.push_back({std::move(reason), std::move(message), std::move(field)});
  }

  void Run(const json& value, const json& schema_in, const std::string& path) {
    if (++depth > 64) {
      --depth;
      return;
    }
    const json* schema = set.Resolve(schema_in);
    if (!schema) {
      Add("FieldValueInvalid", "Invalid value: schema reference could not be resolved", path);
    } else if (schema->is_object()) {
      Check(value, *schema, path);
    }
    --depth;
  }

  void Check(const json& v, const json& s, const std::string& path) {
    if (auto a = s.find("allOf"); a != s.end() && a->is_array())
      for (const auto& sub : *a) Run(v, sub, path);
    bool int_or_string =
        s.value("x-kubernetes-int-or-string", false) || s.value("format", "") == "int-or-string";
    if (v.is_null()) {
      if (s.value("nullable", false)) return;
      return;  // structural schemas prune nulls of non-nullable fields
    }
    std::string type = s.value("type", "");
    if (int_or_string) {
      if (!v.is_string() && !IsIntegral(v)) {
        std::string t = TypeName(v);
        Add("FieldValueTypeInvalid",
            "Invalid value: \"" + t + "\": " + path +
                " in body must be of type integer,string: \"" + t + "\"",
            path);
        return;
      }
    } else if (!type.empty()) {
      bool ok = (type == "object" && v.is_object()) || (type == "array" && v.is_array()) ||
                (type == "string" && v.is_string()) || (type == "boolean" && v.is_boolean()) ||
                (type == "integer" && IsIntegral(v)) || (type == "number" && v.is_number());
      if (!ok) {
        std::string t = TypeName(v);
        Add("FieldValueTypeInvalid",
            "Invalid value: \"" + t + "\": " + path + " in body must be of type " + type + ": \"" +
                t + "\"",
            path);
        return;
      }
    }
    if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
      if (std::find(e->begin(), e->end(), v) == e->end()) {
        std::vector<std::string> sup;
        for (const auto& x : *e) sup.push_back(x.is_string() ? x.get<std::string>() : x.dump());
        StatusCause c = NotSupportedCause(path, v, {});
        std::string list;
        for (size_t i = 0; i < e->size(); ++i) list += (i ? ", " : "") + RenderValue((*e)[i]);
        c.message += ": supported values: " + list;
        Add(c.reason, c.message, path);
      }
    }
    if (v.is_number()) CheckNumber(v, s, path);
    if (v.is_string()) CheckString(v.get_ref<const std::string&>(), s, path);
    if (v.is_array()) CheckArray(v, s, path);
    if (v.is_object()) CheckObject(v, s, path);
  }

  void CheckNumber(const json& v, const json& s, const std::string& path) {
    double d = v.get<double>();
    std::string fmt = s.value("format", "");
    if (fmt == "int32" && IsIntegral(v) && (d < -2147483648.0 || d > 2147483647.0))
      Add("FieldValueInvalid",
          "Invalid value: " + Num(v) + ": " + path + " in body must be of type int32: \"" + Num(v) +
              "\"",
          path);
    if (auto m = s.find("minimum"); m != s.end() && m->is_number()) {
      bool excl = s.value("exclusiveMinimum", false);
      if (excl ? d <= m->get<double>() : d < m->get<double>())
        Add("FieldValueInvalid",
            "Invalid value: " + Num(v) + ": " + path + " in body should be greater than " +
                (excl ? "" : "or equal to ") + Num(*m),
            path);
    }
    if (auto m = s.find("maximum"); m != s.end() && m->is_number()) {
      bool excl = s.value("exclusiveMaximum", false);
      if (excl ? d >= m->get<double>() : d > m->get<double>())
        Add("FieldValueInvalid",
            "Invalid value: " + Num(v) + ": " + path + " in body should be less than " +
                (excl ? "" : "or equal to ") + Num(*m),
            path);
    }
    if (auto m = s.find("multipleOf"); m != s.end() && m->is_number() && m->get<double>() > 0) {
      double q = d / m->get<double>();
      if (std::floor(q) != q)
        Add("FieldValueInvalid",
            "Invalid value: " + Num(v) + ": " + path + " in body should be a multiple of " +
                Num(*m),
            path);
    }
  }

  void CheckString(const std::string& v, const json& s, const std::string& path) {
    // Length in characters (UTF-8 code points), as kube-openapi counts.
    size_t chars = 0;
    for (unsigned char c : v) chars += (c & 0xC0) != 0x80;
    if (auto m = s.find("maxLength");
        m != s.end() && m->is_number_integer() && chars > m->get<size_t>())
      Add("FieldValueTooLong", "Too long: may not be more than " + m->dump() + " bytes", path);
    if (auto m = s.find("minLength");
        m != s.end() && m->is_number_integer() && chars < m->get<size_t>())
      Add("FieldValueInvalid",
          "Invalid value: " + json(v).dump() + ": " + path + " in body should be at least " +
              m->dump() + " chars long",
          path);
    if (auto p = s.find("pattern"); p != s.end() && p->is_string()) {
      const std::regex* re = CompiledPattern(p->get<std::string>());
      bool ok = false;
      if (re && v.size() <= 1 << 16) {
        try {
          ok = std::regex_search(v, *re);
        } catch (const std::regex_error&) {
          ok = false;
        }
      }
      if (!ok)
        Add("FieldValueInvalid",
            "Invalid value: " + json(v).dump() + ": " + path + " in body should match '" +
                p->get<std::string>() + "'",
            path);
    }
    std::string fmt = s.value("format", "");
    if (fmt == "date-time" || fmt == "datetime") {
      static const std::regex kRfc3339(
          R"(^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$)");
      if (!std::regex_match(v, kRfc3339))
        Add("FieldValueInvalid",
            "Invalid value: " + json(v).dump() + ": " + path +
                " in body must be of type date-time: " + json(v).dump(),
            path);
    }
  }

  void CheckArray(const json& v, const json& s, const std::string& path) {
    if (auto m = s.find("maxItems");
        m != s.end() && m->is_number_integer() && v.size() > m->get<size_t>())
      Add("FieldValueTooMany",
          "Too many: " + std::to_string(v.size()) + ": must have at most " + m->dump() + " items",
          path);
    if (auto m = s.find("minItems");
        m != s.end() && m->is_number_integer() && v.size() < m->get<size_t>())
      Add("FieldValueInvalid",
          "Invalid value: " + std::to_string(v.size()) + ": " + path +
              " in body should have at least " + m->dump() + " items",
          path);
    std::string lt = s.value("x-kubernetes-list-type", "");
    if (lt == "set") {
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          if (v[i] == v[j]) {
            Add("FieldValueDuplicate", "Duplicate value: " + RenderValue(v[i]), Index(path, i));
            break;
          }
    } else if (lt == "map") {
      auto keys = s.find("x-kubernetes-list-map-keys");
      if (keys != s.end() && keys->is_array()) {
        std::set<std::string> seen;
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_object()) continue;
          json k = json::object();
          for (const auto& key : *keys)
            if (key.is_string() && v[i].contains(key.get<std::string>()))
              k[key.get<std::string>()] = v[i][key.get<std::string>()];
          if (!seen.insert(k.dump()).second)
            Add("FieldValueDuplicate", "Duplicate value: " + k.dump(), Index(path, i));
        }
      }
    }
    if (auto it = s.find("items"); it != s.end() && (it->is_object()))
      for (size_t i = 0; i < v.size(); ++i) Run(v[i], *it, Index(path, i));
  }

  void CheckObject(const json& v, const json& s, const std::string& path) {
    if (auto m = s.find("maxProperties");
        m != s.end() && m->is_number_integer() && v.size() > m->get<size_t>())
      Add("FieldValueTooMany",
          "Too many: " + std::to_string(v.size()) + ": must have at most " + m->dump() + " items",
          path);
    if (auto m = s.find("minProperties");
        m != s.end() && m->is_number_integer() && v.size() < m->get<size_t>())
      Add("FieldValueInvalid",
          "Invalid value: " + std::to_string(v.size()) + ": " + path +
              " in body should have at least " + m->dump() + " properties",
          path);
    if (auto r = s.find("required"); r != s.end() && r->is_array())
      for (const auto& k : *r) {
        if (!k.is_string()) continue;
        auto f = v.find(k.get<std::string>());
        if (f == v.end() || (f->is_null() && !FieldNullable(s, k.get<std::string>())))
          Add("FieldValueRequired", "Required value", Child(path, k.get<std::string>()));
      }
    if (s.value("x-kubernetes-embedded-resource", false)) {
      for (const char* k : {"apiVersion", "kind"}) {
        auto f = v.find(k);
        if (f == v.end() || !f->is_string() || f->get_ref<const std::string&>().empty())
          Add("FieldValueRequired", "Required value: must not be empty", Child(path, k));
      }
    }
    const json* props = nullptr;
    if (auto p = s.find("properties"); p != s.end() && p->is_object()) props = &*p;
    auto ap = s.find("additionalProperties");
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props) {
        auto ps = props->find(it.key());
        if (ps != props->end()) {
          Run(*it, *ps, Child(path, it.key()));
          continue;
        }
      }
      if (ap != s.end() && ap->is_object()) Run(*it, *ap, MapKey(path, it.key()));
    }
  }

  bool FieldNullable(const json& s, const std::string& key) {
    auto p = s.find("properties");
    if (p == s.end() || !p->is_object() || !p->contains(key)) return false;
    const json* fs = set.Resolve((*p)[key]);
    return fs && fs->is_object() && fs->value("nullable", false);
  }
};

void Unknown(const SchemaSet& set, const json& v, const json& schema_in, const std::string& path,
             bool root, std::vector<std::string>& out, int depth) {
  if (depth > 64 || out.size() > 256) return;
  const json* s = set.Resolve(schema_in);
  if (!s || !s->is_object()) return;
  if (s->value("x-kubernetes-preserve-unknown-fields", false) && !s->contains("properties")) return;
  // Named component objects without properties are opaque in the built-in documents
  // (FieldsV1, RawExtension): anything goes inside them.
  if (s != &schema_in && !s->contains("properties") && !s->contains("additionalProperties") &&
      !s->contains("items"))
    return;
  bool embedded = s->value("x-kubernetes-embedded-resource", false);
  if (auto a = s->find("allOf");
      a != s->end() && a->is_array() && a->size() == 1 && !s->contains("properties")) {
    Unknown(set, v, (*a)[0], path, root, out, depth + 1);
    return;
  }
  if (v.is_array()) {
    if (auto it = s->find("items"); it != s->end())
      for (size_t i = 0; i < v.size(); ++i)
        Unknown(set, v[i], *it, Index(path, i), false, out, depth + 1);
    return;
  }
  if (!v.is_object()) return;
  const json* props = nullptr;
  if (auto p = s->find("properties"); p != s->end() && p->is_object()) props = &*p;
  auto ap = s->find("additionalProperties");
  bool preserve = s->value("x-kubernetes-preserve-unknown-fields", false);
  static const json kObjectMetaRef = {
      {"$ref", "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}};
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    std::string child = Child(path, k);
    if ((root || embedded) && (k == "apiVersion" || k == "kind")) continue;
    if ((root || embedded) && k == "metadata") {
      if (set.Find("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"))
        Unknown(set, *it, kObjectMetaRef, child, false, out, depth + 1);
      continue;
    }
    if (props && props->contains(k)) {
      Unknown(set, *it, (*props)[k], child, false, out, depth + 1);
    } else if (ap != s->end() && ap->is_object()) {
      Unknown(set, *it, *ap, MapKey(path, k), false, out, depth + 1);
    } else if (ap != s->end() && ap->is_boolean() && ap->get<bool>()) {
      continue;
    } else if (!preserve) {
      out.push_back(child);
    }
  }
}

}  // namespace

SchemaValidation SchemaSet::Validate(const json& value, const json& schema,
                                     std::string_view root) const {
  SchemaValidation out;
  Validator v{*this, out};
  v.Run(value, schema, std::string(root));
  return out;
}

SchemaValidation SchemaSet::ValidateNamed(const json& value, std::string_view name) const {
  return Validate(value, json{{"$ref", std::string(kRefPrefix) + std::string(name)}});
}

std::vector<std::string> SchemaSet::UnknownFields(const json& value, const json& schema) const {
  std::vector<std::string> out;
  Unknown(*this, value, schema, "", true, out, 0);
  return out;
}

std::string StrictDecodingMessage(const std::vector<std::string>& unknown_fields) {
  std::string s = "strict decoding error: ";
  for (size_t i = 0; i < unknown_fields.size(); ++i) {
    if (i) s += ", ";
    s += "unknown field \"" + unknown_fields[i] + "\"";
  }
  return s;
}

json InvalidStatus(std::string_view kind, std::string_view group, std::string_view name,
                   const std::vector<StatusCause>& causes) {
  return InvalidErr(kind, group, name, causes).ToJson();
}

#ifndef GG_SIM_DATA_DIR
#define GG_SIM_DATA_DIR "src/sim/data"
#endif
std::string DefaultDataRoot() { return GG_SIM_DATA_DIR; }

std::string OpenApiDirFor(const std::string& data_root, std::string_view kube_version) {
  // 1.32/1.33 serve resource.k8s.io v1beta1 (the 1.32 documents); 1.34+ serve v1 (1.35 set).
  std::string rel =
      (kube_version == "1.32" || kube_version == "1.33") ? "release-1.32" : "release-1.35";
  return data_root + "/openapi/" + rel;
}

StatusOr<SchemaSet> LoadBuiltinSchemas(const std::string& dir, std::string_view kube_version) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFoundError("OpenAPI directory not found: " + dir);
  SchemaSet set;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) return NotFoundError("no OpenAPI documents in " + dir);
  for (const auto& f : files) GG_RETURN_IF_ERROR(set.AddDocumentFile(f));
  set.AddSchema("io.k8s.api.resource." + DeviceTaintRuleVersion(kube_version) + ".DeviceTaintRule",
                DeviceTaintRuleSchema(kube_version));
  return set;
}

std::string DeviceTaintRuleVersion(std::string_view kube_version) {
  return kube_version >= std::string_view("1.36") ? "v1beta2" : "v1alpha3";
}

json DeviceTaintRuleSchema(std::string_view kube_version) {
  const bool v135 = kube_version >= std::string_view("1.35");
  json effects = json::array({"NoSchedule", "NoExecute"});
  if (v135) effects.push_back("None");
  json selector = {{"type", "object"},
                   {"properties",
                    {{"driver", {{"type", "string"}}},
                     {"pool", {{"type", "string"}}},
                     {"device", {{"type", "string"}}}}}};
  if (!v135) {
    selector["properties"]["deviceClassName"] = {{"type", "string"}};
    json cel = {{"type", "object"}, {"required", {"expression"}}};
    cel["properties"]["expression"] = {{"type", "string"}};
    json item = {{"type", "object"}};
    item["properties"]["cel"] = cel;
    selector["properties"]["selectors"] = {
        {"type", "array"}, {"maxItems", 32}, {"x-kubernetes-list-type", "atomic"}, {"items", item}};
  }
  json taint = {{"type", "object"},
                {"required", {"key", "effect"}},
                {"properties",
                 {{"key", {{"type", "string"}}},
                  {"value", {{"type", "string"}}},
                  {"effect", {{"type", "string"}, {"enum", effects}}},
                  {"timeAdded", {{"type", "string"}, {"format", "date-time"}}}}}};
  json s = {
      {"description", "DeviceTaintRule (hand-written: absent from the saved OpenAPI documents)."},
      {"type", "object"},
      {"required", {"spec"}},
      {"x-kubernetes-group-version-kind",
       {{{"group", "resource.k8s.io"},
         {"version", DeviceTaintRuleVersion(kube_version)},
         {"kind", "DeviceTaintRule"}}}},
      {"properties",
       {{"apiVersion", {{"type", "string"}}},
        {"kind", {{"type", "string"}}},
        {"metadata",
         {{"allOf",
           {{{"$ref", "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}}}},
          {"default", json::object()}}},
        {"spec",
         {{"type", "object"},
          {"required", {"taint"}},
          {"properties", {{"deviceSelector", selector}, {"taint", taint}}}}}}}};
  if (v135) {
    s["properties"]["status"] = {
        {"type", "object"},
        {"properties",
         {{"conditions",
           {{"type", "array"},
            {"maxItems", 8},
            {"x-kubernetes-list-type", "map"},
            {"x-kubernetes-list-map-keys", {"type"}},
            {"items",
             {{"allOf",
               {{{"$ref", "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Condition"}}}},
              {"default", json::object()}}}}}}}};
  }
  return s;
}

}  // namespace gg::sim

// ---- Go validation of built-in kinds ------------------------------------------------

namespace gg::sim {
namespace {

const json& At(const json& obj, std::initializer_list<const char*> keys) {
  return JsonAt(obj, keys);
}

std::string S(const json& v) { return v.is_string() ? v.get<std::string>() : ""; }

void Append(std::vector<StatusCause>& out, std::vector<StatusCause> more) {
  for (auto& c : more) out.push_back(std::move(c));
}

// validateNodeTaints / DRA device taints: key qualified name, value label value, effect.
void ValidateTaints(const json& taints, const std::string& path,
                    const std::vector<std::string>& effects, bool unique,
                    std::vector<StatusCause>& out) {
  if (taints.is_null()) return;
  if (!taints.is_array()) return out.push_back(InvalidCause(path, taints, "must be a list"));
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < taints.size(); ++i) {
    const json& t = taints[i];
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!t.is_object()) {
      out.push_back(InvalidCause(p, t, "must be an object"));
      continue;
    }
    std::string key = S(t.value("key", json()));
    for (auto& m : IsQualifiedName(key)) out.push_back(InvalidCause(p + ".key", key, m));
    if (t.contains("value") && !t["value"].is_null()) {
      auto errs = IsValidLabelValue(S(t["value"]));
      if (!errs.empty()) {
        std::string joined;
        for (auto& e : errs) joined += (joined.empty() ? "" : "; ") + e;
        out.push_back(InvalidCause(p + ".value", t["value"], joined));
      }
    }
    const json& eff = t.value("effect", json());
    std::string effect = S(eff);
    if (effect.empty()) {
      out.push_back(RequiredCause(p + ".effect"));
    } else if (std::find(effects.begin(), effects.end(), effect) == effects.end()) {
      out.push_back(NotSupportedCause(p + ".effect", effect, effects));
    }
    if (unique && !seen.insert({key, effect}).second) {
      StatusCause c = DuplicateCause(p, t);
      c.message += ": taints must be unique by key and effect pair";
      out.push_back(c);
    }
  }
}

void ValidateTolerations(const json& tols, const std::string& path, std::vector<StatusCause>& out) {
  if (!tols.is_array()) return;
  for (size_t i = 0; i < tols.size(); ++i) {
    const json& t = tols[i];
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!t.is_object()) {
      out.push_back(InvalidCause(p, t, "must be an object"));
      continue;
    }
    std::string key = S(t.value("key", json()));
    if (!key.empty())
      for (auto& m : IsQualifiedName(key)) out.push_back(InvalidCause(p + ".key", key, m));
    std::string op = S(t.value("operator", json()));
    if (key.empty() && op != "Exists")
      out.push_back(InvalidCause(p + ".operator", op,
                                 "operator must be Exists when `key` is empty, which means \"match "
                                 "all values and all keys\""));
    if (!op.empty() && op != "Exists" && op != "Equal")
      out.push_back(NotSupportedCause(p + ".operator", op, {"Equal", "Exists"}));
    if (op == "Exists" && !S(t.value("value", json())).empty())
      out.push_back(
          InvalidCause(p + ".operator", op, "value must be empty when `operator` is 'Exists'"));
    std::string effect = S(t.value("effect", json()));
    if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
        effect != "NoExecute")
      out.push_back(NotSupportedCause(p + ".effect", effect,
                                      {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
    if (t.contains("tolerationSeconds") && !t["tolerationSeconds"].is_null() &&
        effect != "NoExecute")
      out.push_back(InvalidCause(p + ".effect", effect,
                                 "effect must be 'NoExecute' when `tolerationSeconds` is set"));
  }
}

void ValidatePodSpec(const json& spec, const std::string& path, std::vector<StatusCause>& out) {
  if (!spec.is_object()) return out.push_back(RequiredCause(path));
  const json& cs = spec.value("containers", json());
  if (!cs.is_array() || cs.empty()) {
    out.push_back(RequiredCause(path + ".containers"));
  } else {
    std::set<std::string> names;
    for (size_t i = 0; i < cs.size(); ++i) {
      std::string p = path + ".containers[" + std::to_string(i) + "]";
      const json& c = cs[i];
      std::string name = S(At(c, {"name"}));
      if (name.empty()) {
        out.push_back(RequiredCause(p + ".name"));
      } else {
        for (auto& m : IsDns1123Label(name)) out.push_back(InvalidCause(p + ".name", name, m));
        if (!names.insert(name).second) out.push_back(DuplicateCause(p + ".name", name));
      }
      if (S(At(c, {"image"})).empty()) out.push_back(RequiredCause(p + ".image"));
    }
  }
  ValidateTolerations(spec.value("tolerations", json()), path + ".tolerations", out);
  std::string rp = S(spec.value("restartPolicy", json()));
  if (!rp.empty() && rp != "Always" && rp != "OnFailure" && rp != "Never")
    out.push_back(NotSupportedCause(path + ".restartPolicy", rp, {"Always", "OnFailure", "Never"}));
}

// Int-or-percent fields of a PDB (ValidatePositiveIntOrPercent + IsNotMoreThan100Percent).
void ValidateIntOrPercent(const json& v, const std::string& path, std::vector<StatusCause>& out) {
  if (v.is_null()) return;
  if (v.is_number_integer()) {
    if (v.get<int64_t>() < 0)
      out.push_back(InvalidCause(path, v, "must be greater than or equal to 0"));
    return;
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    bool ok = s.size() >= 2 && s.back() == '%' &&
              std::all_of(s.begin(), s.end() - 1, [](char c) { return c >= '0' && c <= '9'; });
    if (!ok) {
      out.push_back(
          InvalidCause(path, v,
                       "a valid percent string must be a numeric string followed by an ending '%' "
                       "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"));
      return;
    }
    if (s.size() > 4 || std::stoi(s.substr(0, s.size() - 1)) > 100)
      out.push_back(InvalidCause(path, v, "must not be greater than 100%"));
    return;
  }
  out.push_back(InvalidCause(path, v, "must be an integer or a percentage string"));
}

void ValidateCoreEvent(const json& ev, std::vector<StatusCause>& out) {
  std::string ns = S(At(ev, {"metadata", "namespace"}));
  std::string io_ns = S(At(ev, {"involvedObject", "namespace"}));
  if (!At(ev, {"involvedObject"}).is_object()) out.push_back(RequiredCause("involvedObject"));
  bool has_time = !At(ev, {"eventTime"}).is_null() && !S(At(ev, {"eventTime"})).empty();
  const char* mismatch = "does not match event.namespace";
  if (!has_time) {
    if (io_ns.empty()) {
      if (!ns.empty() && ns != "default")
        out.push_back(InvalidCause("involvedObject.namespace", io_ns, mismatch));
    } else if (ns != io_ns) {
      out.push_back(InvalidCause("involvedObject.namespace", io_ns, mismatch));
    }
  } else {
    if (io_ns.empty() && ns != "default" && ns != "kube-system")
      out.push_back(InvalidCause("involvedObject.namespace", io_ns, mismatch));
    std::string rc = S(At(ev, {"reportingComponent"}));
    if (rc.empty()) out.push_back(RequiredCause("reportingComponent"));
    for (auto& m : IsQualifiedName(rc)) out.push_back(InvalidCause("reportingComponent", rc, m));
    auto limited = [&](const char* field, size_t limit, bool required) {
      std::string v = S(At(ev, {field}));
      if (required && v.empty()) out.push_back(RequiredCause(field));
      if (v.size() > limit)
        out.push_back(
            InvalidCause(field, "", "can have at most " + std::to_string(limit) + " characters"));
    };
    limited("reportingInstance", 128, true);
    limited("action", 128, true);
    limited("reason", 128, true);
    limited("message", 1024, false);
  }
  if (!ns.empty())
    for (auto& m : IsDns1123Subdomain(ns)) out.push_back(InvalidCause("namespace", ns, m));
}

// events.k8s.io/v1 create rules on the v1 shape (regarding/note/deprecated*).
void ValidateEventsV1(const json& ev, bool is_create, std::vector<StatusCause>& out) {
  // Core-shaped legacy rules, on the v1 names.
  json core = ev;
  if (ev.contains("regarding")) core["involvedObject"] = ev["regarding"];
  if (ev.contains("note")) core["message"] = ev["note"];
  if (ev.contains("reportingController")) core["reportingComponent"] = ev["reportingController"];
  ValidateCoreEvent(core, out);
  for (auto& c : out) {
    if (c.field.rfind("involvedObject", 0) == 0) c.field = "regarding" + c.field.substr(14);
    if (c.field == "message") c.field = "note";
    if (c.field == "reportingComponent") c.field = "reportingController";
  }
  if (!is_create) return;
  if (At(ev, {"eventTime"}).is_null()) out.push_back(RequiredCause("eventTime"));
  std::string type = S(At(ev, {"type"}));
  if (type != "Normal" && type != "Warning")
    out.push_back(InvalidCause("type", "", "has invalid value: " + type));
  for (const char* f : {"deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount",
                        "deprecatedSource"}) {
    const json& v = At(ev, {f});
    bool set = !v.is_null() && !(v.is_number() && v.get<double>() == 0) &&
               !(v.is_object() && v.empty()) &&
               !(v.is_string() && v.get_ref<const std::string&>().empty());
    if (set) out.push_back(InvalidCause(f, "", "needs to be unset"));
  }
  const json& series = At(ev, {"series"});
  if (series.is_object()) {
    const json& count = series.value("count", json());
    if (!count.is_number_integer() || count.get<int64_t>() < 2)
      out.push_back(InvalidCause("series.count", "", "should be at least 2"));
    if (series.value("lastObservedTime", json()).is_null())
      out.push_back(RequiredCause("series.lastObservedTime"));
  }
}

}  // namespace

namespace {

void ValidatePdb(const json& obj, std::vector<StatusCause>& out) {
  const json& min_av = At(obj, {"spec", "minAvailable"});
  const json& max_un = At(obj, {"spec", "maxUnavailable"});
  if (!min_av.is_null() && !max_un.is_null())
    out.push_back(InvalidCause("spec", obj.value("spec", json()),
                               "minAvailable and maxUnavailable cannot be both set"));
  ValidateIntOrPercent(min_av, "spec.minAvailable", out);
  ValidateIntOrPercent(max_un, "spec.maxUnavailable", out);
  const json& sel = At(obj, {"spec", "selector"});
  if (!sel.is_null()) {
    auto ls = LabelSelector::FromJson(sel);
    if (!ls.ok()) out.push_back(InvalidCause("spec.selector", sel, ls.status().message()));
  }
  std::string p = S(At(obj, {"spec", "unhealthyPodEvictionPolicy"}));
  if (!p.empty() && p != "IfHealthyBudget" && p != "AlwaysAllow")
    out.push_back(NotSupportedCause("spec.unhealthyPodEvictionPolicy", p,
                                    {"IfHealthyBudget", "AlwaysAllow"}));
}

void ValidateLease(const json& obj, std::vector<StatusCause>& out) {
  const json& d = At(obj, {"spec", "leaseDurationSeconds"});
  if (d.is_number() && d.get<double>() <= 0)
    out.push_back(InvalidCause("spec.leaseDurationSeconds", d, "must be greater than 0"));
  const json& t = At(obj, {"spec", "leaseTransitions"});
  if (t.is_number() && t.get<double>() < 0)
    out.push_back(InvalidCause("spec.leaseTransitions", t, "must be greater than or equal to 0"));
}

// Device taint effects: None is known from 1.35 on.
std::vector<std::string> DeviceTaintEffects(std::string_view kube_version) {
  std::vector<std::string> effects = {"NoSchedule", "NoExecute"};
  if (kube_version >= std::string_view("1.35")) effects.insert(effects.begin(), "None");
  return effects;
}

void ValidateDeviceTaintRule(const json& obj, std::string_view kube_version,
                             std::vector<StatusCause>& out) {
  const json& taint = At(obj, {"spec", "taint"});
  if (!taint.is_object())
    out.push_back(RequiredCause("spec.taint"));
  else
    ValidateTaints(json::array({taint}), "spec.taint", DeviceTaintEffects(kube_version), false,
                   out);
  for (auto& c : out)
    if (c.field.rfind("spec.taint[0]", 0) == 0) c.field = "spec.taint" + c.field.substr(13);
}

// A ResourceSlice: driver and pool, each device named with at most 16 taints, at most 128
// devices (64 when any has taints).
void ValidateResourceSlice(const json& obj, std::string_view version, std::string_view kube_version,
                           std::vector<StatusCause>& out) {
  const std::vector<std::string> effects = DeviceTaintEffects(kube_version);
  if (S(At(obj, {"spec", "driver"})).empty()) out.push_back(RequiredCause("spec.driver"));
  if (S(At(obj, {"spec", "pool", "name"})).empty()) out.push_back(RequiredCause("spec.pool.name"));
  const json& devs = At(obj, {"spec", "devices"});
  if (!devs.is_array()) return;
  bool any_taints = false;
  for (size_t i = 0; i < devs.size(); ++i) {
    const json& taints =
        version == "v1beta1" ? At(devs[i], {"basic", "taints"}) : At(devs[i], {"taints"});
    std::string p = "spec.devices[" + std::to_string(i) + "]" +
                    (version == "v1beta1" ? ".basic" : "") + ".taints";
    if (taints.is_array() && !taints.empty()) any_taints = true;
    if (taints.is_array() && taints.size() > 16)
      out.push_back({"FieldValueTooMany",
                     "Too many: " + std::to_string(taints.size()) + ": must have at most 16 items",
                     p});
    ValidateTaints(taints, p, effects, false, out);
    if (S(At(devs[i], {"name"})).empty())
      out.push_back(RequiredCause("spec.devices[" + std::to_string(i) + "].name"));
  }
  size_t limit = any_taints ? 64 : 128;
  if (devs.size() > limit)
    out.push_back({"FieldValueTooMany",
                   "Too many: " + std::to_string(devs.size()) + ": must have at most " +
                       std::to_string(limit) + " items",
                   "spec.devices"});
}

void ValidateWorkload(const json& obj, bool is_create, std::vector<StatusCause>& out) {
  if (is_create) ValidatePodSpec(At(obj, {"spec", "template", "spec"}), "spec.template.spec", out);
  const json& r = At(obj, {"spec", "replicas"});
  if (r.is_number() && r.get<double>() < 0)
    out.push_back(InvalidCause("spec.replicas", r, "must be greater than or equal to 0"));
}

}  // namespace

std::vector<StatusCause> ValidateBuiltin(const json& obj, std::string_view group,
                                         std::string_view version, std::string_view kind,
                                         bool namespaced, bool is_create,
                                         std::string_view kube_version) {
  std::vector<StatusCause> out;
  if (!obj.is_object()) {
    out.push_back(InvalidCause("", obj, "the object must be a JSON object"));
    return out;
  }
  const bool core_event = kind == "Event" && group.empty();
  const bool v1_event = kind == "Event" && group == "events.k8s.io";
  NameRule rule = NameRule::kDns1123Subdomain;
  if (kind == "Namespace") rule = NameRule::kDns1123Label;
  if (core_event) rule = NameRule::kNone;  // legacy core events skip ObjectMeta name checks
  Append(out, ValidateObjectMeta(obj.value("metadata", json()), namespaced, rule));
  if (kind == "Node" && group.empty()) {
    ValidateTaints(At(obj, {"spec", "taints"}), "spec.taints",
                   {"NoSchedule", "PreferNoSchedule", "NoExecute"}, true, out);
  } else if (kind == "Pod" && group.empty()) {
    if (is_create) ValidatePodSpec(obj.value("spec", json()), "spec", out);
  } else if (core_event) {
    ValidateCoreEvent(obj, out);
  } else if (v1_event) {
    ValidateEventsV1(obj, is_create, out);
  } else if (kind == "PodDisruptionBudget") {
    ValidatePdb(obj, out);
  } else if (kind == "Lease") {
    ValidateLease(obj, out);
  } else if (kind == "DeviceTaintRule") {
    ValidateDeviceTaintRule(obj, kube_version, out);
  } else if (kind == "ResourceSlice") {
    ValidateResourceSlice(obj, version, kube_version, out);
  } else if (kind == "Deployment" || kind == "ReplicaSet" || kind == "DaemonSet" || kind == "Job") {
    ValidateWorkload(obj, is_create, out);
  }
  return out;
}
}  // namespace gg::sim
