// Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch with the merge
// keys of the built-in kinds (k8s.io/api struct tags / x-kubernetes-patch-* extensions).
#include "sim/patch.h"

#include <algorithm>
#include <map>
#include <set>

namespace gg::sim {

using nlohmann::json;

// ---- RFC 7386 ----------------------------------------------------------------------

namespace {

json MergeValue(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  json out = target.is_object() ? target : json::object();
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it->is_null()) {
      out.erase(it.key());
    } else {
      auto cur = out.find(it.key());
      out[it.key()] = MergeValue(cur == out.end() ? json() : *cur, *it);
    }
  }
  return out;
}

}  // namespace

StatusOr<json> ApplyMergePatch(const json& obj, const json& patch) {
  if (!patch.is_object())
    return InvalidArgumentError("invalid merge patch: the patch must be a JSON object, got " +
                                std::string(patch.type_name()));
  return MergeValue(obj, patch);
}

// ---- RFC 6902 ----------------------------------------------------------------------

namespace {

constexpr std::string_view kTestFailedReason = "JsonPatchTestFailed";

StatusOr<std::vector<std::string>> ParsePointer(const json& p) {
  if (!p.is_string()) return InvalidArgumentError("path must be a string");
  const std::string& s = p.get_ref<const std::string&>();
  std::vector<std::string> out;
  if (s.empty()) return out;
  if (s[0] != '/')
    return InvalidArgumentError("JSON pointer must be empty or start with a \"/\": " + s);
  size_t i = 1;
  std::string cur;
  for (; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == '/') {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (s[i] == '~') {
      if (i + 1 < s.size() && s[i + 1] == '0')
        cur += '~';
      else if (i + 1 < s.size() && s[i + 1] == '1')
        cur += '/';
      else
        return InvalidArgumentError("invalid JSON pointer escape in " + s);
      ++i;
      continue;
    }
    cur += s[i];
  }
  return out;
}

std::optional<size_t> ArrayIndex(const std::string& tok, size_t size, bool allow_end) {
  if (allow_end && tok == "-") return size;
  if (tok.empty() || tok.size() > 9 || (tok.size() > 1 && tok[0] == '0')) return std::nullopt;
  size_t v = 0;
  for (char c : tok) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<size_t>(c - '0');
  }
  if (v > size || (!allow_end && v == size)) return std::nullopt;
  return v;
}

std::string PointerString(const std::vector<std::string>& toks) {
  std::string s;
  for (const auto& t : toks) s += "/" + t;
  return s;
}

Status Missing(std::string_view op, const std::vector<std::string>& path) {
  return InvalidArgumentError(std::string(op) +
                              " operation does not apply: doc is missing path: \"" +
                              PointerString(path) + "\": missing value");
}

// Returns the container for the last token (or nullptr when the path is missing).
json* Parent(json& doc, const std::vector<std::string>& toks) {
  json* cur = &doc;
  for (size_t i = 0; i + 1 < toks.size(); ++i) {
    if (cur->is_object()) {
      auto it = cur->find(toks[i]);
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (cur->is_array()) {
      auto idx = ArrayIndex(toks[i], cur->size(), false);
      if (!idx) return nullptr;
      cur = &(*cur)[*idx];
    } else {
      return nullptr;
    }
  }
  return cur;
}

json* Get(json& doc, const std::vector<std::string>& toks) {
  if (toks.empty()) return &doc;
  json* p = Parent(doc, toks);
  if (!p) return nullptr;
  if (p->is_object()) {
    auto it = p->find(toks.back());
    return it == p->end() ? nullptr : &*it;
  }
  if (p->is_array()) {
    auto idx = ArrayIndex(toks.back(), p->size(), false);
    return idx ? &(*p)[*idx] : nullptr;
  }
  return nullptr;
}

Status Add(json& doc, const std::vector<std::string>& toks, json value, std::string_view op) {
  if (toks.empty()) {
    doc = std::move(value);
    return OkStatus();
  }
  json* p = Parent(doc, toks);
  if (!p) return Missing(op, toks);
  if (p->is_object()) {
    (*p)[toks.back()] = std::move(value);
    return OkStatus();
  }
  if (p->is_array()) {
    auto idx = ArrayIndex(toks.back(), p->size(), true);
    if (!idx)
      return InvalidArgumentError(std::string(op) +
                                  " operation does not apply: doc is missing path: \"" +
                                  PointerString(toks) + "\": index out of bounds");
    p->insert(p->begin() + static_cast<std::ptrdiff_t>(*idx), std::move(value));
    return OkStatus();
  }
  return Missing(op, toks);
}

Status Remove(json& doc, const std::vector<std::string>& toks, std::string_view op) {
  if (toks.empty()) return InvalidArgumentError("cannot remove the whole document");
  json* p = Parent(doc, toks);
  if (!p) return Missing(op, toks);
  if (p->is_object()) {
    if (p->erase(toks.back()) == 0) return Missing(op, toks);
    return OkStatus();
  }
  if (p->is_array()) {
    auto idx = ArrayIndex(toks.back(), p->size(), false);
    if (!idx) return Missing(op, toks);
    p->erase(p->begin() + static_cast<std::ptrdiff_t>(*idx));
    return OkStatus();
  }
  return Missing(op, toks);
}

}  // namespace

bool IsJsonPatchTestFailure(const Status& s) { return s.reason() == kTestFailedReason; }

StatusOr<json> ApplyJsonPatch(const json& obj, const json& patch) {
  if (!patch.is_array())
    return InvalidArgumentError("invalid JSON patch: the patch must be a JSON array of operations");
  json doc = obj;
  for (size_t i = 0; i < patch.size(); ++i) {
    const json& op = patch[i];
    if (!op.is_object() || !op.contains("op") || !op["op"].is_string())
      return InvalidArgumentError("invalid JSON patch: operation " + std::to_string(i) +
                                  " has no \"op\"");
    const std::string name = op["op"].get<std::string>();
    if (!op.contains("path"))
      return InvalidArgumentError("invalid JSON patch: " + name + " operation missing path");
    GG_ASSIGN_OR_RETURN(auto path, ParsePointer(op["path"]));
    if (name == "add" || name == "replace" || name == "test") {
      if (!op.contains("value")) return InvalidArgumentError(name + " operation missing value");
    }
    if (name == "add") {
      GG_RETURN_IF_ERROR(Add(doc, path, op["value"], name));
    } else if (name == "remove") {
      GG_RETURN_IF_ERROR(Remove(doc, path, name));
    } else if (name == "replace") {
      json* t = Get(doc, path);
      if (!t)
        return InvalidArgumentError("replace operation does not apply: doc is missing key: " +
                                    PointerString(path) + ": missing value");
      *t = op["value"];
    } else if (name == "move" || name == "copy") {
      if (!op.contains("from")) return InvalidArgumentError(name + " operation missing from");
      GG_ASSIGN_OR_RETURN(auto from, ParsePointer(op["from"]));
      json* src = Get(doc, from);
      if (!src) return Missing(name, from);
      if (name == "move" && path.size() > from.size() &&
          std::equal(from.begin(), from.end(), path.begin()))
        return InvalidArgumentError(
            "move operation does not apply: cannot move a value into its own child");
      json v = *src;
      if (name == "move") GG_RETURN_IF_ERROR(Remove(doc, from, name));
      GG_RETURN_IF_ERROR(Add(doc, path, std::move(v), name));
    } else if (name == "test") {
      json* t = Get(doc, path);
      if (!t || *t != op["value"]) {
        Status s =
            InvalidArgumentError("testing value " + PointerString(path) + " failed: test failed");
        s.set_reason(std::string(kTestFailedReason));
        return s;
      }
    } else {
      return InvalidArgumentError("Unexpected kind: " + name);
    }
  }
  return doc;
}

// ---- strategic merge patch ---------------------------------------------------------

namespace {

using Table = std::map<std::string, ListStrategy, std::less<>>;

ListStrategy ByKey(std::string key, bool retain = false) {
  return {ListStrategy::Kind::kMergeByKey, std::move(key), retain};
}
ListStrategy Primitive() { return {ListStrategy::Kind::kMergePrimitive, "", false}; }

void AddPodSpec(Table& t, const std::string& p) {
  for (const char* c : {"containers", "initContainers", "ephemeralContainers"}) {
    std::string base = p + c;
    t[base] = ByKey("name");
    t[base + "[].ports"] = ByKey("containerPort");
    t[base + "[].env"] = ByKey("name");
    t[base + "[].volumeMounts"] = ByKey("mountPath");
    t[base + "[].volumeDevices"] = ByKey("devicePath");
  }
  t[p + "volumes"] = ByKey("name", true);
  t[p + "imagePullSecrets"] = ByKey("name");
  t[p + "hostAliases"] = ByKey("ip");
  t[p + "topologySpreadConstraints"] = ByKey("topologyKey");
  t[p + "resourceClaims"] = ByKey("name", true);
  t[p + "schedulingGates"] = ByKey("name");
}

const std::map<std::string, Table, std::less<>>& Tables() {
  static const auto* tables = [] {
    auto* m = new std::map<std::string, Table, std::less<>>();
    Table pod;
    AddPodSpec(pod, "spec.");
    pod["status.conditions"] = ByKey("type");
    pod["status.podIPs"] = ByKey("ip");
    pod["status.hostIPs"] = ByKey("ip");
    pod["status.resourceClaimStatuses"] = ByKey("name", true);
    (*m)["Pod"] = pod;
    Table tmpl;
    AddPodSpec(tmpl, "spec.template.spec.");
    tmpl["status.conditions"] = ByKey("type");
    for (const char* k :
         {"Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job", "ReplicationController"})
      (*m)[k] = tmpl;
    Table cron;
    AddPodSpec(cron, "spec.jobTemplate.spec.template.spec.");
    (*m)["CronJob"] = cron;
    (*m)["PodTemplate"] = [] {
      Table t;
      AddPodSpec(t, "template.spec.");
      return t;
    }();
    Table node;
    node["spec.podCIDRs"] = Primitive();
    node["status.conditions"] = ByKey("type");
    node["status.addresses"] = ByKey("type");
    (*m)["Node"] = node;
    Table cond;
    cond["status.conditions"] = ByKey("type");
    for (const char* k : {"PodDisruptionBudget", "Namespace", "CustomResourceDefinition",
                          "DeviceTaintRule", "ResourceClaim"})
      (*m)[k] = cond;
    for (const char* k :
         {"Event", "Lease", "ResourceSlice", "ConfigMap", "Secret", "ServiceAccount", "Service",
          "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "PriorityClass", "Binding",
          "Eviction", "DeviceClass"})
      (*m)[k] = Table();
    (*m)["Service"]["spec.ports"] = ByKey("port");
    return m;
  }();
  return *tables;
}

struct Smp {
  const Table* table;

  ListStrategy For(const std::string& path) const {
    if (path == "metadata.finalizers") return Primitive();
    if (path == "metadata.ownerReferences") return ByKey("uid");
    if (table) {
      auto it = table->find(path);
      if (it != table->end()) return it->second;
    }
    return {};
  }

  static std::string Child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  // Returns nullopt when the patch deletes the whole map ($patch: delete). Takes `original` by
  // value: a caller moves the subtree in, so nested maps are merged in place (copying each
  // level again cost a whole node's status per nodes/status patch).
  StatusOr<std::optional<json>> MergeMap(json original, const json& patch,
                                         const std::string& path) const {
    json out = original.is_object() ? std::move(original) : json::object();
    if (auto d = patch.find("$patch"); d != patch.end()) {
      if (!d->is_string())
        return InvalidArgumentError("invalid $patch directive: must be a string");
      const std::string& v = d->get_ref<const std::string&>();
      if (v == "delete") return std::optional<json>();
      if (v == "replace") {
        json copy = patch;
        copy.erase("$patch");
        GG_ASSIGN_OR_RETURN(auto r, MergeMap(json::object(), copy, path));
        return r;
      }
      if (v != "merge") return InvalidArgumentError("Unknown patch type: " + v);
    }
    if (auto rk = patch.find("$retainKeys"); rk != patch.end()) {
      if (!rk->is_array()) return InvalidArgumentError("$retainKeys must be a list of strings");
      std::set<std::string> keep;
      for (const auto& k : *rk) {
        if (!k.is_string()) return InvalidArgumentError("$retainKeys must be a list of strings");
        keep.insert(k.get<std::string>());
      }
      for (auto it = out.begin(); it != out.end();) {
        if (!keep.count(it.key()))
          it = out.erase(it);
        else
          ++it;
      }
    }
    std::map<std::string, json> orders;
    for (auto it = patch.begin(); it != patch.end(); ++it) {
      const std::string& key = it.key();
      if (key == "$patch" || key == "$retainKeys") continue;
      static constexpr std::string_view kDel = "$deleteFromPrimitiveList/";
      static constexpr std::string_view kOrder = "$setElementOrder/";
      if (key.rfind(kDel, 0) == 0) {
        std::string field = key.substr(kDel.size());
        if (!it->is_array()) return InvalidArgumentError(key + " must be a list");
        auto cur = out.find(field);
        if (cur != out.end() && cur->is_array()) {
          json kept = json::array();
          for (const auto& e : *cur)
            if (std::find(it->begin(), it->end(), e) == it->end()) kept.push_back(e);
          *cur = std::move(kept);
        }
        continue;
      }
      if (key.rfind(kOrder, 0) == 0) {
        if (!it->is_array()) return InvalidArgumentError(key + " must be a list");
        orders[key.substr(kOrder.size())] = *it;
        continue;
      }
      if (!key.empty() && key[0] == '$')
        return InvalidArgumentError("unknown strategic merge patch directive: " + key);
      if (it->is_null()) {
        out.erase(key);
        continue;
      }
      std::string child = Child(path, key);
      auto cur = out.find(key);
      const json& orig = cur == out.end() ? json() : *cur;
      if (it->is_object()) {
        // Moved out and back in: on an error `out` is dropped anyway.
        json sub = cur != out.end() && cur->is_object() ? std::move(*cur) : json::object();
        GG_ASSIGN_OR_RETURN(auto merged, MergeMap(std::move(sub), *it, child));
        if (merged)
          out[key] = std::move(*merged);
        else
          out.erase(key);
      } else if (it->is_array()) {
        GG_ASSIGN_OR_RETURN(json merged, MergeList(orig, *it, child));
        out[key] = std::move(merged);
      } else {
        out[key] = *it;
      }
    }
    for (auto& [field, order] : orders) {
      auto cur = out.find(field);
      if (cur == out.end() || !cur->is_array()) continue;
      ListStrategy st = For(Child(path, field));
      *cur = Reorder(*cur, order, st);
    }
    return std::optional<json>(std::move(out));
  }

  static json Reorder(const json& list, const json& order, const ListStrategy& st) {
    auto key_of = [&](const json& e) -> json {
      if (st.kind == ListStrategy::Kind::kMergeByKey)
        return e.is_object() && e.contains(st.merge_key) ? e[st.merge_key] : json();
      return e;
    };
    json out = json::array();
    std::vector<bool> used(list.size(), false);
    for (const auto& o : order) {
      json want =
          (st.kind == ListStrategy::Kind::kMergeByKey && o.is_object() && o.contains(st.merge_key))
              ? o[st.merge_key]
              : o;
      for (size_t i = 0; i < list.size(); ++i)
        if (!used[i] && key_of(list[i]) == want) {
          out.push_back(list[i]);
          used[i] = true;
          break;
        }
    }
    for (size_t i = 0; i < list.size(); ++i)
      if (!used[i]) out.push_back(list[i]);
    return out;
  }

  StatusOr<json> MergeList(const json& original, const json& patch, const std::string& path) const {
    ListStrategy st = For(path);
    std::string elem_path = path + "[]";
    if (st.kind == ListStrategy::Kind::kAtomic) {
      // Atomic: the patch list replaces; nested maps still lose their directives.
      json out = json::array();
      for (const auto& e : patch) {
        if (e.is_object()) {
          GG_ASSIGN_OR_RETURN(auto m, MergeMap(json::object(), e, elem_path));
          if (m) out.push_back(std::move(*m));
        } else {
          out.push_back(e);
        }
      }
      return out;
    }
    json out = original.is_array() ? original : json::array();
    if (st.kind == ListStrategy::Kind::kMergePrimitive) {
      for (const auto& e : patch) {
        if (e.is_object() || e.is_array())
          return InvalidArgumentError("invalid patch for " + path +
                                      ": expected a list of primitives");
        if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
      }
      return out;
    }
    // Merge by key. A {"$patch":"replace"} element replaces the list with the others.
    bool replace = false;
    for (const auto& e : patch)
      if (e.is_object() && e.value("$patch", json()) == "replace") replace = true;
    if (replace) out = json::array();
    for (const auto& e : patch) {
      if (!e.is_object())
        return InvalidArgumentError("invalid patch for " + path + ": list of " + st.merge_key +
                                    "-keyed maps expected, got " + e.dump());
      std::string directive =
          e.contains("$patch") && e["$patch"].is_string() ? e["$patch"].get<std::string>() : "";
      if (directive == "replace" && e.size() == 1) continue;
      auto k = e.find(st.merge_key);
      if (k == e.end())
        return InvalidArgumentError("map: " + e.dump() +
                                    " does not contain declared merge key: " + st.merge_key);
      auto match = std::find_if(out.begin(), out.end(), [&](const json& o) {
        return o.is_object() && o.contains(st.merge_key) && o[st.merge_key] == *k;
      });
      if (directive == "delete") {
        out.erase(std::remove_if(out.begin(), out.end(),
                                 [&](const json& o) {
                                   return o.is_object() && o.contains(st.merge_key) &&
                                          o[st.merge_key] == *k;
                                 }),
                  out.end());
        continue;
      }
      json elem = e;
      if (directive == "merge") elem.erase("$patch");
      if (match != out.end()) {
        GG_ASSIGN_OR_RETURN(auto merged, MergeMap(std::move(*match), elem, elem_path));
        if (merged)
          *match = std::move(*merged);
        else
          out.erase(match);
      } else {
        GG_ASSIGN_OR_RETURN(auto merged, MergeMap(json::object(), elem, elem_path));
        if (merged) out.push_back(std::move(*merged));
      }
    }
    return out;
  }
};

}  // namespace

bool SupportsStrategicMerge(std::string_view kind) { return Tables().find(kind) != Tables().end(); }

ListStrategy ListStrategyFor(std::string_view kind, std::string_view path) {
  auto it = Tables().find(kind);
  Smp smp{it == Tables().end() ? nullptr : &it->second};
  return smp.For(std::string(path));
}

StatusOr<json> ApplyStrategicMergePatch(const json& obj, const json& patch, std::string_view kind) {
  if (!patch.is_object())
    return InvalidArgumentError(
        "invalid strategic merge patch: the patch must be a JSON object, got " +
        std::string(patch.type_name()));
  auto it = Tables().find(kind);
  Smp smp{it == Tables().end() ? nullptr : &it->second};
  GG_ASSIGN_OR_RETURN(auto merged, smp.MergeMap(obj, patch, ""));
  if (!merged)
    return InvalidArgumentError("invalid strategic merge patch: cannot delete the whole object");
  return std::move(*merged);
}

}  // namespace gg::sim
