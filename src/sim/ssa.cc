// Server-side apply and managedFields (see ssa.h).
#include "sim/ssa.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "sim/schema.h"

namespace gg::sim {

using nlohmann::json;

namespace {

constexpr std::string_view kObjectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

// Metadata the server owns: never part of anyone's field set.
bool ServerMeta(const std::string& k) {
  static const std::set<std::string> kSkip = {"name",
                                              "namespace",
                                              "uid",
                                              "resourceVersion",
                                              "generation",
                                              "creationTimestamp",
                                              "selfLink",
                                              "managedFields",
                                              "deletionTimestamp",
                                              "deletionGracePeriodSeconds"};
  return kSkip.count(k) > 0;
}

struct Cursor {
  const SchemaSet* set = nullptr;
  const json* s = nullptr;  // resolved schema or nullptr (untyped)

  static Cursor Of(const SchemaSet* set, const json* schema) {
    Cursor c{set, nullptr};
    if (!schema) return c;
    const json* r = schema;
    for (int i = 0; i < 4 && r; ++i) {
      if (r->contains("$ref") || (r->contains("allOf") && (*r)["allOf"].is_array() &&
                                  (*r)["allOf"].size() == 1 && !r->contains("properties"))) {
        const json* next =
            set ? set->Resolve(r->contains("$ref") ? *r : (*r)["allOf"][0]) : nullptr;
        if (!next || next == r) break;
        r = next;
      } else {
        break;
      }
    }
    c.s = r;
    return c;
  }
  bool typed() const { return s && s->is_object(); }
  Cursor Child(const std::string& key) const {
    if (!typed()) return {set, nullptr};
    if (s->contains("properties") && (*s)["properties"].contains(key))
      return Of(set, &(*s)["properties"][key]);
    if (s->contains("additionalProperties") && (*s)["additionalProperties"].is_object())
      return Of(set, &(*s)["additionalProperties"]);
    return {set, nullptr};
  }
  Cursor Items() const {
    if (!typed() || !s->contains("items")) return {set, nullptr};
    return Of(set, &(*s)["items"]);
  }
  std::string Str(const char* k) const {
    return typed() && s->contains(k) && (*s)[k].is_string() ? (*s)[k].get<std::string>() : "";
  }
  // "map" (with keys), "set" or "atomic".
  std::string ListType(std::vector<std::string>* keys) const {
    std::string lt = Str("x-kubernetes-list-type");
    if (typed() && s->contains("x-kubernetes-list-map-keys"))
      for (const auto& k : (*s)["x-kubernetes-list-map-keys"])
        if (k.is_string()) keys->push_back(k.get<std::string>());
    if (!lt.empty()) return lt == "map" && keys->empty() ? "atomic" : lt;
    // Types without list-type: the strategic-merge annotations say the same thing.
    std::string strategy = Str("x-kubernetes-patch-strategy");
    std::string mkey = Str("x-kubernetes-patch-merge-key");
    if (strategy.find("merge") != std::string::npos) {
      if (!mkey.empty()) {
        keys->push_back(mkey);
        return "map";
      }
      return "set";
    }
    return "atomic";
  }
  bool AtomicMap() const { return Str("x-kubernetes-map-type") == "atomic"; }
};

Cursor Root(const SsaType& t) { return Cursor::Of(t.set, t.root); }

Cursor MetaCursor(const SsaType& t) {
  if (!t.set) return {nullptr, nullptr};
  return Cursor::Of(t.set, t.set->Find(kObjectMeta));
}

std::string ItemKey(const json& item, const std::vector<std::string>& keys) {
  json k = json::object();  // nlohmann::json objects are key-sorted, as SMD writes them
  for (const auto& name : keys)
    if (item.is_object() && item.contains(name)) k[name] = item[name];
  return "k:" + k.dump();
}

// Collects the fields of `v` into `out`; with `changed`, also those whose value differs from
// `ov` (the same position in the previous object, nullptr when absent there): leaves by
// value, list items and set members by presence.
struct Walker {
  FieldSet& out;
  FieldSet* changed;
  // Skip an object member equal to its counterpart in the other object (never inside a list,
  // where items are matched by key): for a diff of two objects, walking both ways.
  bool prune = false;

  void Member(const FieldPath& path, bool same) {
    out.insert(path);
    if (changed && !same) changed->insert(path);
  }

  void List(const json& arr, const json* ov, const Cursor& c, FieldPath& path) {
    const bool pruned = std::exchange(prune, false);
    ListItems(arr, ov, c, path);
    prune = pruned;
  }
  void ListItems(const json& arr, const json* ov, const Cursor& c, FieldPath& path) {
    std::vector<std::string> keys;
    std::string lt = c.ListType(&keys);
    if (lt == "atomic" || arr.empty()) {
      Member(path, ov && *ov == arr);
      return;
    }
    const json* old_arr = ov && ov->is_array() ? ov : nullptr;
    Cursor item = c.Items();
    std::map<std::string, const json*> old_items;
    if (old_arr && lt == "map" && changed)
      for (const auto& e : *old_arr)
        if (e.is_object()) old_items.emplace(ItemKey(e, keys), &e);
    for (const auto& e : arr) {
      if (lt == "set") {
        path.push_back("v:" + e.dump());
        bool same = old_arr && std::find(old_arr->begin(), old_arr->end(), e) != old_arr->end();
        Member(path, same);
        path.pop_back();
        continue;
      }
      std::string key = ItemKey(e, keys);
      const json* oe = nullptr;
      if (auto it = old_items.find(key); it != old_items.end()) oe = it->second;
      path.push_back(std::move(key));
      Member(path, oe != nullptr);
      if (e.is_object())
        for (const auto& [k, ev] : e.items()) {
          path.push_back("f:" + k);
          const json* oc = oe && oe->contains(k) ? &(*oe)[k] : nullptr;
          Value(ev, oc, item.Child(k), path);
          path.pop_back();
        }
      path.pop_back();
    }
  }

  void Value(const json& v, const json* ov, const Cursor& c, FieldPath& path) {
    if (v.is_object() && !c.AtomicMap() && !v.empty() &&
        !(c.typed() && c.s->value("x-kubernetes-preserve-unknown-fields", false) &&
          !c.s->contains("properties"))) {
      const json* oo = ov && ov->is_object() ? ov : nullptr;
      for (const auto& [k, cv] : v.items()) {
        const json* oc = nullptr;
        if (oo) {
          auto it = oo->find(k);
          if (it != oo->end()) oc = &*it;
        }
        if (prune && oc && *oc == cv) continue;
        path.push_back("f:" + k);
        Value(cv, oc, c.Child(k), path);
        path.pop_back();
      }
      return;
    }
    if (v.is_array() && c.typed()) {
      List(v, ov, c, path);
      return;
    }
    Member(path, ov && *ov == v);
  }
};

// The value at `path` in `obj`, or nullptr.
const json* At(const json& obj, const FieldPath& path) {
  const json* cur = &obj;
  for (const auto& el : path) {
    if (el.rfind("f:", 0) == 0) {
      if (!cur->is_object()) return nullptr;
      auto it = cur->find(el.substr(2));
      if (it == cur->end()) return nullptr;
      cur = &*it;
    } else if (el.rfind("k:", 0) == 0) {
      if (!cur->is_array()) return nullptr;
      json keys = json::parse(el.substr(2), nullptr, false);
      const json* found = nullptr;
      for (const auto& item : *cur) {
        if (!item.is_object()) continue;
        bool match = keys.is_object();
        for (const auto& [k, kv] : keys.items())
          if (!item.contains(k) || item[k] != kv) match = false;
        if (match) {
          found = &item;
          break;
        }
      }
      if (!found) return nullptr;
      cur = found;
    } else if (el.rfind("v:", 0) == 0) {
      if (!cur->is_array()) return nullptr;
      json want = json::parse(el.substr(2), nullptr, false);
      const json* found = nullptr;
      for (const auto& item : *cur)
        if (item == want) found = &item;
      if (!found) return nullptr;
      cur = found;
    } else {
      return nullptr;
    }
  }
  return cur;
}

void RemoveAt(json& obj, const FieldPath& path) {
  if (path.empty()) return;
  FieldPath parent(path.begin(), path.end() - 1);
  json* cur = &obj;
  for (const auto& el : parent) {
    const json* c = At(*cur, FieldPath{el});
    if (!c) return;
    cur = const_cast<json*>(c);
  }
  const std::string& el = path.back();
  if (el.rfind("f:", 0) == 0) {
    if (cur->is_object()) cur->erase(el.substr(2));
    return;
  }
  if (!cur->is_array()) return;
  const json* target = At(*cur, FieldPath{el});
  if (!target) return;
  for (auto it = cur->begin(); it != cur->end(); ++it)
    if (&*it == target) {
      cur->erase(it);
      return;
    }
}

// Apply-merge: `config` into `live` following the schema.
json Merge(const json& live, const json& config, const Cursor& c) {
  if (config.is_object() && live.is_object() && !c.AtomicMap()) {
    json out = live;
    for (const auto& [k, v] : config.items())
      out[k] = out.contains(k) ? Merge(out[k], v, c.Child(k)) : v;
    return out;
  }
  if (config.is_array() && live.is_array() && c.typed()) {
    std::vector<std::string> keys;
    std::string lt = c.ListType(&keys);
    if (lt == "atomic") return config;
    json out = live;
    Cursor item = c.Items();
    for (const auto& e : config) {
      bool merged = false;
      for (auto& l : out) {
        bool same = lt == "set" ? l == e : (l.is_object() && ItemKey(l, keys) == ItemKey(e, keys));
        if (same) {
          if (lt == "map") l = Merge(l, e, item);
          merged = true;
          break;
        }
      }
      if (!merged) out.push_back(e);
    }
    return out;
  }
  return config;
}

FieldSet Minus(const FieldSet& a, const FieldSet& b) {
  FieldSet out;
  for (const auto& p : a)
    if (!b.count(p)) out.insert(p);
  return out;
}

std::string PrintManager(const json& entry) {
  std::string s = "\"" + entry.value("manager", "") + "\"";
  if (!entry.value("subresource", "").empty())
    s += " with subresource \"" + entry.value("subresource", "") + "\"";
  if (entry.value("operation", "") == "Update") {
    s += " using " + entry.value("apiVersion", "");
    if (entry.contains("time") && entry["time"].is_string())
      s += " at " + entry["time"].get<std::string>();
  }
  return s;
}

const json& ManagedOf(const json& obj) {
  static const json kNone = json::array();
  if (obj.is_object()) {
    auto md = obj.find("metadata");
    if (md != obj.end() && md->is_object()) {
      auto mf = md->find("managedFields");
      if (mf != md->end() && mf->is_array()) return *mf;
    }
  }
  return kNone;
}

bool SameManager(const json& e, const std::string& op, const ManagerInfo& who) {
  return e.value("manager", "") == who.manager && e.value("operation", "") == op &&
         e.value("subresource", "") == who.subresource;
}

json Entry(const std::string& op, const ManagerInfo& who, const FieldSet& s) {
  json e = {{"manager", who.manager}, {"operation", op},          {"apiVersion", who.api_version},
            {"time", who.now},        {"fieldsType", "FieldsV1"}, {"fieldsV1", EncodeFieldsV1(s)}};
  if (!who.subresource.empty()) e["subresource"] = who.subresource;
  return e;
}

// Rewrites the entries with their new sets: empty ones go, changed ones get `now`.
json Rebuild(const json& entries, const std::vector<FieldSet>& original,
             const std::vector<FieldSet>& sets, const std::string& now) {
  json out = json::array();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (sets[i].empty()) continue;
    json e = entries[i];
    if (i >= original.size() || original[i] != sets[i]) {
      e["fieldsV1"] = EncodeFieldsV1(sets[i]);
      e["time"] = now;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

namespace {

// FieldsOf, and with `changed` the fields whose value differs from `old` (null: all). `prune`:
// leave out object members equal in `old` (outside lists); what is left of two such walks,
// one each way, differs exactly where the full sets differ.
FieldSet FieldsOfDiff(const json& obj, const json& old, const SsaType& type, bool status_request,
                      FieldSet* changed, bool prune = false) {
  FieldSet out;
  if (!obj.is_object()) return out;
  Walker w{out, changed, prune};
  Cursor root = Root(type);
  const json* oo = old.is_object() ? &old : nullptr;
  auto child = [](const json* o, const std::string& k) -> const json* {
    if (!o || !o->is_object()) return nullptr;
    auto it = o->find(k);
    return it == o->end() ? nullptr : &*it;
  };
  FieldPath path;
  for (const auto& [k, v] : obj.items()) {
    if (k == "apiVersion" || k == "kind") continue;
    if (type.status_subresource && (k == "status") != status_request) continue;
    if (k == "metadata") {
      if (status_request || !v.is_object()) continue;
      Cursor mc = MetaCursor(type);
      const json* om = child(oo, "metadata");
      for (const auto& [mk, mv] : v.items()) {
        if (ServerMeta(mk)) continue;
        const json* omv = child(om, mk);
        if (prune && omv && *omv == mv) continue;
        path = {"f:metadata", "f:" + mk};
        w.Value(mv, omv, mc.Child(mk), path);
      }
      continue;
    }
    const json* ov = child(oo, k);
    if (prune && ov && *ov == v) continue;
    path = {"f:" + k};
    w.Value(v, ov, root.Child(k), path);
  }
  return out;
}

}  // namespace

FieldSet FieldsOf(const json& obj, const SsaType& type, bool status_request) {
  return FieldsOfDiff(obj, json(), type, status_request, nullptr);
}

json EncodeFieldsV1(const FieldSet& s) {
  json root = json::object();
  for (const auto& p : s) {
    json* cur = &root;
    for (const auto& el : p) cur = &(*cur)[el];
    if (!cur->is_object()) *cur = json::object();
  }
  // A member that also has children is marked with ".".
  for (const auto& p : s) {
    json* cur = &root;
    for (const auto& el : p) cur = &(*cur)[el];
    if (!cur->empty() && !cur->contains(".")) (*cur)["."] = json::object();
  }
  return root;
}

FieldSet DecodeFieldsV1(const json& fields) {
  FieldSet out;
  FieldPath path;
  std::function<void(const json&)> rec = [&](const json& node) {
    for (const auto& [k, v] : node.items()) {
      if (k == ".") {
        out.insert(path);
        continue;
      }
      path.push_back(k);
      if (!v.is_object() || v.empty())
        out.insert(path);
      else
        rec(v);
      path.pop_back();
    }
  };
  if (fields.is_object()) rec(fields);
  return out;
}

std::string FieldPathString(const FieldPath& p) {
  std::string s;
  for (const auto& el : p) {
    if (el.rfind("f:", 0) == 0) {
      s += "." + el.substr(2);
    } else if (el.rfind("k:", 0) == 0) {
      json k = json::parse(el.substr(2), nullptr, false);
      s += "[";
      bool first = true;
      if (k.is_object())
        for (const auto& [name, v] : k.items()) {
          s += (first ? "" : ",") + name + "=" + v.dump();
          first = false;
        }
      s += "]";
    } else if (el.rfind("v:", 0) == 0) {
      s += "[=" + el.substr(2) + "]";
    }
  }
  return s;
}

namespace {

using Conflicts = std::vector<std::pair<std::size_t, FieldPath>>;

// The applied configuration merged into the live object (metadata through the ObjectMeta
// schema; fields only the server sets, apiVersion and kind stay as they are).
json MergeApplied(const json& live, const json& config, const SsaType& type) {
  Cursor root = Root(type);
  json merged = live;
  for (const auto& [k, v] : config.items()) {
    if (k == "metadata" && v.is_object()) {
      Cursor mc = MetaCursor(type);
      for (const auto& [mk, mv] : v.items()) {
        if (ServerMeta(mk)) continue;
        merged["metadata"][mk] =
            merged["metadata"].contains(mk) ? Merge(merged["metadata"][mk], mv, mc.Child(mk)) : mv;
      }
      continue;
    }
    if (k == "apiVersion" || k == "kind") continue;
    merged[k] = merged.contains(k) ? Merge(merged[k], v, root.Child(k)) : v;
  }
  return merged;
}

// The 409 an unforced apply gets, worded like the real server: one conflict on one line,
// several grouped by manager.
ApiError ApplyConflictError(const Conflicts& conflicts, const json& entries, std::string_view kind,
                            std::string_view group, const std::string& name) {
  ApiError e;
  e.code = 409;
  e.reason = "Conflict";
  e.kind = std::string(kind);
  e.group = std::string(group);
  e.name = name;
  for (const auto& [i, p] : conflicts)
    e.causes.push_back(
        {"FieldManagerConflict", "conflict with " + PrintManager(entries[i]), FieldPathString(p)});
  if (conflicts.size() == 1) {
    e.message = "Apply failed with 1 conflict: conflict with " +
                PrintManager(entries[conflicts[0].first]) + ": " +
                FieldPathString(conflicts[0].second);
    return e;
  }
  std::vector<std::size_t> order;
  for (const auto& [i, p] : conflicts)
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  std::string msg;
  for (std::size_t i : order) {
    msg +=
        (msg.empty() ? "" : "\n") + std::string("conflicts with ") + PrintManager(entries[i]) + ":";
    for (const auto& [j, p] : conflicts)
      if (j == i) msg += "\n- " + FieldPathString(p);
  }
  e.message = "Apply failed with " + std::to_string(conflicts.size()) + " conflicts: " + msg;
  return e;
}

// Fields this manager applied before and dropped now go, unless someone else owns them.
// Shallowest first: a dropped list item goes whole (its key fields with it), and what was
// under it is then gone already; a field under a kept item goes on its own.
void RemoveDroppedFields(const std::vector<FieldSet>& sets, std::size_t mine,
                         const FieldSet& applied, json& merged) {
  FieldSet others;
  for (std::size_t i = 0; i < sets.size(); ++i)
    if (i != mine) others.insert(sets[i].begin(), sets[i].end());
  FieldSet dropped = Minus(Minus(sets[mine], applied), others);
  std::vector<FieldPath> order(dropped.begin(), dropped.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const FieldPath& a, const FieldPath& b) { return a.size() < b.size(); });
  for (const auto& p : order) RemoveAt(merged, p);
}

}  // namespace

ApplyOutcome ServerSideApply(const json& live, const json& config, const SsaType& type,
                             const ManagerInfo& who, bool force, std::string_view kind,
                             std::string_view group) {
  ApplyOutcome out;
  const bool status_req = who.subresource == "status";
  FieldSet changed;  // fields this apply sets to another value than the live one
  FieldSet applied = FieldsOfDiff(config, live, type, status_req, &changed);
  if (live.is_null() || !live.is_object()) {
    out.object = config;
    out.object["metadata"]["managedFields"] = json::array({Entry("Apply", who, applied)});
    return out;
  }
  json entries = ManagedOf(live);
  std::vector<FieldSet> sets;
  int mine = -1;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    sets.push_back(DecodeFieldsV1(entries[i].value("fieldsV1", json::object())));
    if (SameManager(entries[i], "Apply", who)) mine = static_cast<int>(i);
  }
  const std::vector<FieldSet> original = sets;
  json merged = MergeApplied(live, config, type);
  // Conflicts: fields this apply changes that another manager owns.
  Conflicts conflicts;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) == mine) continue;
    for (const auto& p : changed)
      if (sets[i].count(p)) conflicts.emplace_back(i, p);
  }
  if (!conflicts.empty() && !force) {
    out.err =
        ApplyConflictError(conflicts, entries, kind, group, live["metadata"].value("name", ""));
    return out;
  }
  for (const auto& [i, p] : conflicts) sets[i].erase(p);  // forced: ownership moves
  if (mine >= 0) {
    RemoveDroppedFields(sets, static_cast<std::size_t>(mine), applied, merged);
    sets[mine] = applied;
  } else {
    entries.push_back(Entry("Apply", who, applied));
    sets.push_back(applied);
  }
  merged["metadata"]["managedFields"] = Rebuild(entries, original, sets, who.now);
  out.object = std::move(merged);
  return out;
}

json UpdateManagedFields(const json& old, const json& next, const SsaType& type,
                         const ManagerInfo& who) {
  const bool status_req = who.subresource == "status";
  const json& given = ManagedOf(next);
  const json& prior = ManagedOf(old);
  if (next.is_object() && next.contains("metadata") && next["metadata"].contains("managedFields") &&
      given != prior)
    return given;  // the client set managedFields itself
  // Only the fields that moved matter here: walking the parts both objects share (on a node,
  // most of it: images, capacity, nodeInfo) built two sets of every path per write.
  FieldSet changed;
  FieldSet now = FieldsOfDiff(next, old, type, status_req, &changed, true);
  FieldSet before =
      old.is_object() ? FieldsOfDiff(old, next, type, status_req, nullptr, true) : FieldSet{};
  FieldSet removed = Minus(before, now);
  if (changed.empty() && removed.empty()) return prior;  // nobody's fields moved
  // Entries are decoded only when a moved field is in them (most writes repeat what their
  // manager already owns and touch nobody else's fields).
  auto has = [](const json& tree, const FieldPath& p) {
    const json* cur = &tree;
    for (const auto& el : p) {
      if (!cur->is_object()) return false;
      auto it = cur->find(el);
      if (it == cur->end()) return false;
      cur = &*it;
    }
    return cur->is_object() && (cur->empty() || cur->contains("."));  // a member, not a parent
  };
  json entries = prior;
  int mine = -1;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    json& e = entries[i];
    static const json kEmpty = json::object();
    auto fit = e.find("fieldsV1");
    const json& fields = fit != e.end() ? *fit : kEmpty;
    const bool is_mine = mine < 0 && SameManager(e, "Update", who);
    if (is_mine) mine = static_cast<int>(i);
    bool moved = false;
    for (const auto& p : removed)
      if (has(fields, p)) moved = true;
    bool gains = false;
    for (const auto& p : changed) {
      if (!has(fields, p)) {
        gains = true;
      } else if (!is_mine) {
        moved = true;
      }
    }
    if (!moved && !(is_mine && gains)) {
      if (is_mine && !changed.empty()) e["time"] = who.now;
      continue;
    }
    FieldSet set = DecodeFieldsV1(fields);
    if (is_mine) {
      set = Minus(set, removed);
      set.insert(changed.begin(), changed.end());
    } else {
      set = Minus(Minus(set, changed), removed);
    }
    e["fieldsV1"] = EncodeFieldsV1(set);
    e["time"] = who.now;
    if (set.empty()) e = nullptr;  // dropped below
  }
  json out = json::array();
  for (auto& e : entries)
    if (!e.is_null()) out.push_back(std::move(e));
  if (mine < 0 && !changed.empty()) out.push_back(Entry("Update", who, changed));
  return out;
}

}  // namespace gg::sim
