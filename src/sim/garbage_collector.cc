// Simulated garbage collector (and pod GC) by ownerReferences, as kube-controller-manager's:
// - An object all of whose owners are gone (not in the store, or there with another uid) is
//   deleted — with the propagation its own finalizers ask for, else in the background. Owners
//   that are gone are dropped from an object that still has a live owner.
// - An owner deleted with propagationPolicy=Foreground carries the foregroundDeletion
//   finalizer (the API server adds it): its dependants are deleted first, and the finalizer is
//   removed once no dependant with blockOwnerDeletion is left.
// - An owner deleted with propagationPolicy=Orphan carries the orphan finalizer: its
//   dependants lose their ownerReference to it, then the finalizer is removed.
// - Pod GC: a pod bound to a node that no longer exists is deleted (grace 0) after a short
//   quarantine, as the real pod garbage collector does.
// The graph is built from watches on every served resource except events; an owner the
// watches have not shown yet is looked up in the store before anything is deleted.
#include "sim/controllers.h"

#include <chrono>
#include <map>
#include <set>

#include "sim/controller_util.h"

namespace gg::sim {

using nlohmann::json;
using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;

namespace {

struct OwnerRef {
  std::string api_version, kind, name, uid;
  bool block = false;
};

struct Item {
  std::shared_ptr<const ResourceInfo> ri;
  std::string ns, name;
  std::vector<OwnerRef> owners;
  bool deleting = false;
  bool foreground = false;  // being deleted, waiting for its dependants
  bool orphan = false;      // being deleted, its dependants to be orphaned
  std::string rv;
  std::string node;         // pods: spec.nodeName
};

bool HasFinalizer(const json& md, const std::string& f) {
  if (!md.contains("finalizers") || !md["finalizers"].is_array()) return false;
  for (const auto& x : md["finalizers"])
    if (x.is_string() && x.get<std::string>() == f) return true;
  return false;
}

}  // namespace

void Controllers::GarbageCollectorLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto nodes_ri = core_.registry().Find("", "v1", "nodes");
  std::map<std::string, std::unique_ptr<StoreWatch>> watches;  // storage -> watch
  std::map<std::string, Item> items;                           // uid -> object
  std::map<std::string, std::set<std::string>> dependents;     // owner uid -> dependant uids
  std::set<std::string> nodes_present;
  std::map<std::string, std::set<std::string>> pods_on;  // node -> pod uids bound to it
  bool nodes_synced = false;
  std::map<std::string, SteadyTime> orphan_pods;  // pod uid -> when first seen on a missing node
  std::set<std::string> attempt;                  // uids to look at
  SteadyTime last_registry{};
  const auto quarantine = std::max(Scaled(std::chrono::milliseconds(40000)), std::chrono::milliseconds(500));

  auto unlink = [&](const std::string& uid) {
    auto it = items.find(uid);
    if (it == items.end()) return;
    for (const auto& o : it->second.owners) {
      auto d = dependents.find(o.uid);
      if (d == dependents.end()) continue;
      d->second.erase(uid);
      if (d->second.empty()) dependents.erase(d);
      attempt.insert(o.uid);  // an owner waiting for its dependants may be done now
    }
  };
  auto remove_finalizer = [&](const std::string& uid, const std::string& fin) {
    auto it = items.find(uid);
    if (it == items.end()) return;
    const Item& item = it->second;
    auto cur = core_.Get(Target{item.ri, item.ns, item.name, ""});
    if (!cur.ok() || cur.obj["metadata"].value("uid", "") != uid) return;
    json fins = json::array();
    for (const auto& f : cur.obj["metadata"].value("finalizers", json::array()))
      if (!(f.is_string() && f.get<std::string>() == fin)) fins.push_back(f);
    json patch = {{"metadata",
                   {{"resourceVersion", cur.obj["metadata"].value("resourceVersion", "")},
                    {"finalizers", fins.empty() ? json(nullptr) : fins}}}};
    core_.Patch(Target{item.ri, item.ns, item.name, ""}, "application/merge-patch+json", patch, WriteOpts{});
  };
  // Rewrites a dependant's ownerReferences without `drop` (uids); unblock: set
  // blockOwnerDeletion false on the refs to those uids instead.
  auto edit_owner_refs = [&](const std::string& uid, const std::set<std::string>& drop, bool unblock) {
    auto it = items.find(uid);
    if (it == items.end()) return;
    const Item& item = it->second;
    auto cur = core_.Get(Target{item.ri, item.ns, item.name, ""});
    if (!cur.ok() || cur.obj["metadata"].value("uid", "") != uid) return;
    json refs = json::array();
    for (auto r : cur.obj["metadata"].value("ownerReferences", json::array())) {
      bool hit = r.is_object() && drop.count(r.value("uid", ""));
      if (hit && !unblock) continue;
      if (hit) r["blockOwnerDeletion"] = false;
      refs.push_back(std::move(r));
    }
    json patch = {{"metadata",
                   {{"resourceVersion", cur.obj["metadata"].value("resourceVersion", "")},
                    {"ownerReferences", refs.empty() ? json(nullptr) : refs}}}};
    core_.Patch(Target{item.ri, item.ns, item.name, ""}, "application/merge-patch+json", patch, WriteOpts{});
  };
  // Whether the owner `ref` of an object in namespace `ns` exists with that uid; nullopt when
  // its kind is unknown (nothing is deleted on a guess).
  auto owner_exists = [&](const OwnerRef& ref, const std::string& ns) -> std::optional<bool> {
    if (auto it = items.find(ref.uid); it != items.end()) return true;
    std::string group, version = ref.api_version;
    if (auto slash = ref.api_version.find('/'); slash != std::string::npos) {
      group = ref.api_version.substr(0, slash);
      version = ref.api_version.substr(slash + 1);
    }
    auto ri = core_.registry().FindKind(group, version, ref.kind);
    if (!ri) return std::nullopt;
    auto r = core_.Get(Target{ri, ri->namespaced ? ns : "", ref.name, ""});
    if (!r.ok()) return r.err->code == 404 ? std::optional<bool>(false) : std::nullopt;
    return r.obj["metadata"].value("uid", "") == ref.uid;
  };
  auto process = [&](const std::string& uid) {
    auto it = items.find(uid);
    if (it == items.end()) return;
    Item& item = it->second;
    // An owner on its way out.
    if (item.deleting && item.orphan) {
      if (auto d = dependents.find(uid); d != dependents.end())
        for (const auto& dep : std::set<std::string>(d->second)) edit_owner_refs(dep, {uid}, false);
      remove_finalizer(uid, "orphan");
      return;
    }
    if (item.deleting && item.foreground) {
      bool blocking = false;
      if (auto d = dependents.find(uid); d != dependents.end()) {
        for (const auto& dep : d->second) {
          auto di = items.find(dep);
          if (di == items.end()) continue;
          for (const auto& o : di->second.owners) blocking |= o.uid == uid && o.block;
          if (!di->second.deleting) attempt.insert(dep);
        }
      }
      if (!blocking) remove_finalizer(uid, "foregroundDeletion");
      // No return: the object may itself be a dependant whose owners are gone.
    }
    if (item.owners.empty()) return;
    if (item.deleting && !item.foreground) return;
    std::vector<std::string> solid, dangling, waiting;
    for (const auto& o : item.owners) {
      auto e = owner_exists(o, item.ns);
      if (!e) {
        solid.push_back(o.uid);  // unknown kind: keep the object
        continue;
      }
      if (!*e) {
        dangling.push_back(o.uid);
        continue;
      }
      auto oi = items.find(o.uid);
      if (oi != items.end() && oi->second.deleting && oi->second.foreground && o.block) waiting.push_back(o.uid);
      else solid.push_back(o.uid);
    }
    if (!solid.empty()) {
      std::set<std::string> drop(dangling.begin(), dangling.end());
      drop.insert(waiting.begin(), waiting.end());
      if (!drop.empty()) edit_owner_refs(uid, drop, false);
      return;
    }
    if (item.deleting) return;
    std::string policy = "Background";
    if (!waiting.empty() && dependents.count(uid)) {
      policy = "Foreground";
      edit_owner_refs(uid, std::set<std::string>(dangling.begin(), dangling.end()), true);
    }
    auto cur = core_.Get(Target{item.ri, item.ns, item.name, ""});
    if (cur.ok()) {
      const json& md = cur.obj["metadata"];
      if (HasFinalizer(md, "orphan")) policy = "Orphan";
      else if (HasFinalizer(md, "foregroundDeletion")) policy = "Foreground";
    }
    core_.Delete(Target{item.ri, item.ns, item.name, ""},
                 {{"propagationPolicy", policy}, {"preconditions", {{"uid", uid}}}}, WriteOpts{});
  };

  while (!stop.stop_requested()) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_registry >= std::chrono::seconds(1)) {  // CRDs come and go
      last_registry = now;
      std::set<std::string> served;
      for (const auto& ri : core_.registry().All())
        if (ri->resource != "events") served.insert(ri->storage);
      for (const auto& s : served)
        if (!watches.count(s)) watches[s] = std::make_unique<StoreWatch>(core_.store(), s);
      for (auto it = watches.begin(); it != watches.end();)
        it = served.count(it->first) ? std::next(it) : watches.erase(it);
    }
    bool any = false;
    for (auto& [storage, w] : watches) {
      std::deque<WatchEvent> evs;
      w->Pop(evs, std::chrono::milliseconds(0));
      any |= !evs.empty();
      auto ri = core_.registry().FindByStorage(storage);
      if (!ri) continue;
      bool is_nodes = storage == nodes_ri->storage;
      bool is_pods = storage == pods_ri->storage;
      for (const auto& e : evs) {
        const std::string& uid = e.obj->uid;
        if (is_nodes) {
          if (e.type == EventType::kDeleted) {
            nodes_present.erase(e.obj->name);
            if (auto p = pods_on.find(e.obj->name); p != pods_on.end())
              for (const auto& pod : p->second) orphan_pods.emplace(pod, now);
          } else {
            nodes_present.insert(e.obj->name);
          }
        }
        if (is_pods)
          if (auto it = items.find(uid); it != items.end() && !it->second.node.empty()) {
            pods_on[it->second.node].erase(uid);
            if (pods_on[it->second.node].empty()) pods_on.erase(it->second.node);
          }
        if (e.type == EventType::kDeleted) {
          unlink(uid);
          items.erase(uid);
          orphan_pods.erase(uid);
          if (auto d = dependents.find(uid); d != dependents.end())
            for (const auto& dep : d->second) attempt.insert(dep);
          continue;
        }
        unlink(uid);
        Item item;
        item.ri = ri;
        item.ns = e.obj->ns;
        item.name = e.obj->name;
        const std::string& text = e.obj->json;
        bool interesting = is_pods || text.find("\"ownerReferences\"") != std::string::npos ||
                           text.find("\"deletionTimestamp\"") != std::string::npos;
        if (interesting) {
          json o = json::parse(text, nullptr, false);
          if (o.is_object()) {
            const json& md = o["metadata"];
            for (const auto& r : md.value("ownerReferences", json::array())) {
              if (!r.is_object() || r.value("uid", "").empty()) continue;
              item.owners.push_back({r.value("apiVersion", ""), r.value("kind", ""), r.value("name", ""),
                                     r.value("uid", ""), r.value("blockOwnerDeletion", false)});
            }
            item.deleting = md.contains("deletionTimestamp");
            item.foreground = item.deleting && HasFinalizer(md, "foregroundDeletion");
            item.orphan = item.deleting && HasFinalizer(md, "orphan");
            if (is_pods) item.node = Str(o, {"spec", "nodeName"});
          }
        }
        for (const auto& o : item.owners) dependents[o.uid].insert(uid);
        bool check = !item.owners.empty() || item.foreground || item.orphan;
        if (is_pods && !item.node.empty()) {
          pods_on[item.node].insert(uid);
          if (!nodes_present.count(item.node)) orphan_pods.emplace(uid, now);
        }
        items[uid] = std::move(item);
        if (check) attempt.insert(uid);
        if (dependents.count(uid)) attempt.insert(uid);
      }
      if (is_nodes) nodes_synced = true;
    }
    if (!any && attempt.empty()) std::this_thread::sleep_for(internal::kPoll);
    // An owner seen after its dependants is no reason to delete them: look at an object
    // only once its watch batch is in (owner_exists falls back to the store anyway).
    auto todo = std::move(attempt);
    attempt.clear();
    for (const auto& uid : todo) {
      if (stop.stop_requested()) break;
      process(uid);
    }
    // Pod GC: pods on nodes that are gone.
    if (!nodes_synced) continue;
    std::vector<std::string> gone;
    for (auto it = orphan_pods.begin(); it != orphan_pods.end();) {
      auto item = items.find(it->first);
      if (item == items.end() || nodes_present.count(item->second.node)) {
        it = orphan_pods.erase(it);
        continue;
      }
      if (now - it->second >= quarantine) gone.push_back(it->first);
      ++it;
    }
    for (const auto& uid : gone) {
      orphan_pods.erase(uid);
      const Item& item = items[uid];
      if (core_.Get(Target{nodes_ri, "", item.node, ""}).ok()) continue;
      core_.Patch(Target{pods_ri, item.ns, item.name, "status"}, "application/strategic-merge-patch+json",
                  {{"status",
                    {{"conditions",
                      {{{"type", "DisruptionTarget"}, {"status", "True"}, {"reason", "DeletionByPodGC"},
                        {"message", "PodGC: node no longer exists"}, {"lastTransitionTime", core_.NowRfc3339()}}}}}}},
                  WriteOpts{});
      core_.Delete(Target{pods_ri, item.ns, item.name, ""},
                   {{"gracePeriodSeconds", 0}, {"preconditions", {{"uid", uid}}}}, WriteOpts{});
    }
  }
}

}  // namespace gg::sim
