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
#include <chrono>
#include <map>
#include <set>

#include "sim/controller_util.h"
#include "sim/controllers.h"

namespace gg::sim {

using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;
using nlohmann::json;

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
  std::string node;  // pods: spec.nodeName
};

bool HasFinalizer(const json& md, const std::string& f) {
  if (!md.contains("finalizers") || !md["finalizers"].is_array()) return false;
  for (const auto& x : md["finalizers"])
    if (x.is_string() && x.get<std::string>() == f) return true;
  return false;
}

// The owners of an object sorted by what they mean for it.
struct OwnerSort {
  std::vector<std::string> solid;     // present (or of a kind we do not know): keep the object
  std::vector<std::string> dangling;  // gone
  std::vector<std::string> waiting;   // in foreground deletion, blocked on this object
};

// The garbage collector's graph of owners and dependants, fed by a watch on every served
// resource, and the pod garbage collector's view of nodes.
class GarbageCollector {
 public:
  GarbageCollector(ApiCore& core, const Controllers& ctl)
      : core_(core),
        pods_ri_(core.registry().Find("", "v1", "pods")),
        nodes_ri_(core.registry().Find("", "v1", "nodes")),
        quarantine_(std::max(ctl.Scaled(std::chrono::milliseconds(40000)),
                             std::chrono::milliseconds(500))) {}

  void Run(std::stop_token stop);

 private:
  void Unlink(const std::string& uid);
  void RemoveFinalizer(const std::string& uid, const std::string& fin);
  void EditOwnerRefs(const std::string& uid, const std::set<std::string>& drop, bool unblock);
  std::optional<bool> OwnerExists(const OwnerRef& ref, const std::string& ns);
  void Process(const std::string& uid);
  void ReleaseForeground(const std::string& uid);
  OwnerSort SortOwners(const Item& item);
  void DeleteOwnerless(const std::string& uid, const Item& item, const OwnerSort& owners);
  void RefreshWatches(SteadyTime now);
  bool PopWatch(const std::string& storage, StoreWatch& w, SteadyTime now);
  void OnNodeEvent(const WatchEvent& e, SteadyTime now);
  void OnObject(const WatchEvent& e, const std::shared_ptr<const ResourceInfo>& ri, bool is_pods,
                SteadyTime now);
  void CollectPods(SteadyTime now);
  void DeleteOrphanPod(const std::string& uid);

  ApiCore& core_;
  std::shared_ptr<const ResourceInfo> pods_ri_, nodes_ri_;
  std::chrono::milliseconds quarantine_;
  std::map<std::string, std::unique_ptr<StoreWatch>> watches_;  // storage -> watch
  std::map<std::string, Item> items_;                           // uid -> object
  std::map<std::string, std::set<std::string>> dependents_;     // owner uid -> dependant uids
  std::set<std::string> nodes_present_;
  std::map<std::string, std::set<std::string>> pods_on_;  // node -> pod uids bound to it
  bool nodes_synced_ = false;
  std::map<std::string, SteadyTime> orphan_pods_;  // pod uid -> when first seen on a missing node
  std::set<std::string> attempt_;                  // uids to look at
  SteadyTime last_registry_{};
};

void GarbageCollector::Unlink(const std::string& uid) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  for (const auto& o : it->second.owners) {
    auto d = dependents_.find(o.uid);
    if (d == dependents_.end()) continue;
    d->second.erase(uid);
    if (d->second.empty()) dependents_.erase(d);
    attempt_.insert(o.uid);  // an owner waiting for its dependants may be done now
  }
}

void GarbageCollector::RemoveFinalizer(const std::string& uid, const std::string& fin) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  const Item& item = it->second;
  auto cur = core_.Get(Target{item.ri, item.ns, item.name, ""});
  if (!cur.ok() || cur.obj["metadata"].value("uid", "") != uid) return;
  json fins = json::array();
  for (const auto& f : cur.obj["metadata"].value("finalizers", json::array()))
    if (!(f.is_string() && f.get<std::string>() == fin)) fins.push_back(f);
  json patch = {{"metadata",
                 {{"resourceVersion", cur.obj["metadata"].value("resourceVersion", "")},
                  {"finalizers", fins.empty() ? json(nullptr) : fins}}}};
  core_.Patch(Target{item.ri, item.ns, item.name, ""}, "application/merge-patch+json", patch,
              WriteOpts{});
}

// Rewrites a dependant's ownerReferences without `drop` (uids); unblock: set
// blockOwnerDeletion false on the refs to those uids instead.
void GarbageCollector::EditOwnerRefs(const std::string& uid, const std::set<std::string>& drop,
                                     bool unblock) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
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
  core_.Patch(Target{item.ri, item.ns, item.name, ""}, "application/merge-patch+json", patch,
              WriteOpts{});
}

// Whether the owner `ref` of an object in namespace `ns` exists with that uid; nullopt when
// its kind is unknown (nothing is deleted on a guess).
std::optional<bool> GarbageCollector::OwnerExists(const OwnerRef& ref, const std::string& ns) {
  if (auto it = items_.find(ref.uid); it != items_.end()) return true;
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
}

// A foreground-deleted owner: its dependants are looked at (and so deleted), and the
// finalizer goes once none blocks it.
void GarbageCollector::ReleaseForeground(const std::string& uid) {
  bool blocking = false;
  if (auto d = dependents_.find(uid); d != dependents_.end()) {
    for (const auto& dep : d->second) {
      auto di = items_.find(dep);
      if (di == items_.end()) continue;
      for (const auto& o : di->second.owners) blocking |= o.uid == uid && o.block;
      if (!di->second.deleting) attempt_.insert(dep);
    }
  }
  if (!blocking) RemoveFinalizer(uid, "foregroundDeletion");
}

OwnerSort GarbageCollector::SortOwners(const Item& item) {
  OwnerSort s;
  for (const auto& o : item.owners) {
    auto e = OwnerExists(o, item.ns);
    if (!e) {
      s.solid.push_back(o.uid);  // unknown kind: keep the object
      continue;
    }
    if (!*e) {
      s.dangling.push_back(o.uid);
      continue;
    }
    auto oi = items_.find(o.uid);
    if (oi != items_.end() && oi->second.deleting && oi->second.foreground && o.block)
      s.waiting.push_back(o.uid);
    else
      s.solid.push_back(o.uid);
  }
  return s;
}

// An object with no live owner left is deleted, with the propagation its finalizers ask for.
void GarbageCollector::DeleteOwnerless(const std::string& uid, const Item& item,
                                       const OwnerSort& owners) {
  std::string policy = "Background";
  if (!owners.waiting.empty() && dependents_.count(uid)) {
    policy = "Foreground";
    EditOwnerRefs(uid, std::set<std::string>(owners.dangling.begin(), owners.dangling.end()), true);
  }
  auto cur = core_.Get(Target{item.ri, item.ns, item.name, ""});
  if (cur.ok()) {
    const json& md = cur.obj["metadata"];
    if (HasFinalizer(md, "orphan"))
      policy = "Orphan";
    else if (HasFinalizer(md, "foregroundDeletion"))
      policy = "Foreground";
  }
  core_.Delete(Target{item.ri, item.ns, item.name, ""},
               {{"propagationPolicy", policy}, {"preconditions", {{"uid", uid}}}}, WriteOpts{});
}

void GarbageCollector::Process(const std::string& uid) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  Item& item = it->second;
  // An owner on its way out.
  if (item.deleting && item.orphan) {
    if (auto d = dependents_.find(uid); d != dependents_.end())
      for (const auto& dep : std::set<std::string>(d->second)) EditOwnerRefs(dep, {uid}, false);
    RemoveFinalizer(uid, "orphan");
    return;
  }
  // No return after this: the object may itself be a dependant whose owners are gone.
  if (item.deleting && item.foreground) ReleaseForeground(uid);
  if (item.owners.empty()) return;
  if (item.deleting && !item.foreground) return;
  OwnerSort owners = SortOwners(item);
  if (!owners.solid.empty()) {
    std::set<std::string> drop(owners.dangling.begin(), owners.dangling.end());
    drop.insert(owners.waiting.begin(), owners.waiting.end());
    if (!drop.empty()) EditOwnerRefs(uid, drop, false);
    return;
  }
  if (item.deleting) return;
  DeleteOwnerless(uid, item, owners);
}

// A watch on every served resource but events; CRDs come and go.
void GarbageCollector::RefreshWatches(SteadyTime now) {
  if (now - last_registry_ < std::chrono::seconds(1)) return;
  last_registry_ = now;
  std::set<std::string> served;
  for (const auto& ri : core_.registry().All())
    if (ri->resource != "events") served.insert(ri->storage);
  for (const auto& s : served)
    if (!watches_.count(s)) watches_[s] = std::make_unique<StoreWatch>(core_.store(), s);
  for (auto it = watches_.begin(); it != watches_.end();)
    it = served.count(it->first) ? std::next(it) : watches_.erase(it);
}

void GarbageCollector::OnNodeEvent(const WatchEvent& e, SteadyTime now) {
  if (e.type == EventType::kDeleted) {
    nodes_present_.erase(e.obj->name);
    if (auto p = pods_on_.find(e.obj->name); p != pods_on_.end())
      for (const auto& pod : p->second) orphan_pods_.emplace(pod, now);
  } else {
    nodes_present_.insert(e.obj->name);
  }
}

// One object's change into the graph: its owners, whether and how it is being deleted, and
// (pods) its node.
void GarbageCollector::OnObject(const WatchEvent& e, const std::shared_ptr<const ResourceInfo>& ri,
                                bool is_pods, SteadyTime now) {
  const std::string& uid = e.obj->uid;
  if (is_pods)
    if (auto it = items_.find(uid); it != items_.end() && !it->second.node.empty()) {
      pods_on_[it->second.node].erase(uid);
      if (pods_on_[it->second.node].empty()) pods_on_.erase(it->second.node);
    }
  if (e.type == EventType::kDeleted) {
    Unlink(uid);
    items_.erase(uid);
    orphan_pods_.erase(uid);
    if (auto d = dependents_.find(uid); d != dependents_.end())
      for (const auto& dep : d->second) attempt_.insert(dep);
    return;
  }
  Unlink(uid);
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
  for (const auto& o : item.owners) dependents_[o.uid].insert(uid);
  bool check = !item.owners.empty() || item.foreground || item.orphan;
  if (is_pods && !item.node.empty()) {
    pods_on_[item.node].insert(uid);
    if (!nodes_present_.count(item.node)) orphan_pods_.emplace(uid, now);
  }
  items_[uid] = std::move(item);
  if (check) attempt_.insert(uid);
  if (dependents_.count(uid)) attempt_.insert(uid);
}

// The events one watch has; true when there were any.
bool GarbageCollector::PopWatch(const std::string& storage, StoreWatch& w, SteadyTime now) {
  std::deque<WatchEvent> evs;
  w.Pop(evs, std::chrono::milliseconds(0));
  auto ri = core_.registry().FindByStorage(storage);
  if (!ri) return !evs.empty();
  bool is_nodes = storage == nodes_ri_->storage;
  bool is_pods = storage == pods_ri_->storage;
  for (const auto& e : evs) {
    if (is_nodes) OnNodeEvent(e, now);
    OnObject(e, ri, is_pods, now);
  }
  if (is_nodes) nodes_synced_ = true;
  return !evs.empty();
}

// Pod GC: pods on nodes that are gone, after the quarantine.
void GarbageCollector::CollectPods(SteadyTime now) {
  std::vector<std::string> gone;
  for (auto it = orphan_pods_.begin(); it != orphan_pods_.end();) {
    auto item = items_.find(it->first);
    if (item == items_.end() || nodes_present_.count(item->second.node)) {
      it = orphan_pods_.erase(it);
      continue;
    }
    if (now - it->second >= quarantine_) gone.push_back(it->first);
    ++it;
  }
  for (const auto& uid : gone) DeleteOrphanPod(uid);
}

void GarbageCollector::DeleteOrphanPod(const std::string& uid) {
  orphan_pods_.erase(uid);
  const Item& item = items_[uid];
  if (core_.Get(Target{nodes_ri_, "", item.node, ""}).ok()) return;
  core_.Patch(Target{pods_ri_, item.ns, item.name, "status"},
              "application/strategic-merge-patch+json",
              {{"status",
                {{"conditions",
                  {{{"type", "DisruptionTarget"},
                    {"status", "True"},
                    {"reason", "DeletionByPodGC"},
                    {"message", "PodGC: node no longer exists"},
                    {"lastTransitionTime", core_.NowRfc3339()}}}}}}},
              WriteOpts{});
  core_.Delete(Target{pods_ri_, item.ns, item.name, ""},
               {{"gracePeriodSeconds", 0}, {"preconditions", {{"uid", uid}}}}, WriteOpts{});
}

void GarbageCollector::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    auto now = std::chrono::steady_clock::now();
    RefreshWatches(now);
    bool any = false;
    for (auto& [storage, w] : watches_) any |= PopWatch(storage, *w, now);
    if (!any && attempt_.empty()) std::this_thread::sleep_for(internal::kPoll);
    // An owner seen after its dependants is no reason to delete them: look at an object
    // only once its watch batch is in (OwnerExists falls back to the store anyway).
    auto todo = std::move(attempt_);
    attempt_.clear();
    for (const auto& uid : todo) {
      if (stop.stop_requested()) break;
      Process(uid);
    }
    if (nodes_synced_) CollectPods(now);
  }
}

}  // namespace

void Controllers::GarbageCollectorLoop(std::stop_token stop) {
  GarbageCollector(core_, *this).Run(stop);
}

}  // namespace gg::sim
